"""`ladder follow`: poll a live hero's eval points, refresh its forecast snapshots, raise alerts.

Everything lives under <root>/<ladder>/follow/:
  points.jsonl         the hero's eval points read so far (step, tokens, loss, and its task metrics)
  forecasts.jsonl      one summary per snapshot (at_step, predicted_final, lower, upper, band_rule ...)
  forecasts/<step>.csv each snapshot's whole curve (step, tokens, frac, loss, lower, upper)
  events.jsonl         alerts and marks (ladder.analysis.follow_alerts)
  horizon.json         the rungs' snapshot error by horizon (computed once)
  state.json           the commit point: written last each poll, so a poll that dies half-way is redone
and the points are mirrored to imported/hero_actual/ (what import-wandb writes), which the report and
the dashboard overlay on the forecast. A restart reads state.json and carries on where it left off.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ladder.analysis import follow_alerts as alerts
from ladder.analysis.follow_forecast import Context, rung_profile, snapshot
from ladder.analysis.follow_metrics import envelope_events, metric_rows, spike_events
from ladder.analysis.follow_source import Source, read
from ladder.outputs import layout

FOLLOW_DIR = "follow"
STATE = "state.json"
POINTS = "points.jsonl"
HORIZON = "horizon.json"
HERO_ACTUAL = "hero_actual"  # ladder.outputs.readers.HERO_ACTUAL: the imported run the forecast is compared with


@dataclass(frozen=True)
class FollowConfig:
    every_s: float = 600.0
    until: float | None = None  # a wall-clock time (epoch seconds)
    max_polls: int | None = None
    alert_move: float | None = None  # relative; None: a third of the band's half-width
    stall: int = 3
    on_alert: str | None = None
    retry: bool = False  # retry a source that fails on the first poll (later failures are always retried)


def follow_dir(root: str, ladder: str) -> Path:
    return Path(root) / ladder / FOLLOW_DIR


class Follower:
    def __init__(self, out: Path, ctx: Context, source: Source, changes: tuple, config: FollowConfig,
                 say: Callable[[str], None] = print, envelopes: dict[str, pd.DataFrame] | None = None):
        self.out, self.ctx, self.source, self.changes, self.config, self.say = out, ctx, source, changes, config, say
        self.envelopes = envelopes or {}  # tracked training metric -> the rungs' envelope at the hero's size
        self.state = layout.read_json(out / STATE, None) or {"polls": 0, "last_step": None, "snapshots": [],
                                                             "events": [], "notified": 0, "done": False}
        self.points = layout.read_jsonl(out / POINTS) if self.state["last_step"] is not None else pd.DataFrame()
        self._rungs: dict | None = None

    @property
    def rungs(self) -> dict:
        if self._rungs is None:
            cached = layout.read_json(self.out / HORIZON, None)
            if cached is None:
                cached = rung_profile(self.ctx)
                layout.write_json_atomic(self.out / HORIZON, cached)
            self._rungs = cached
        return self._rungs

    def poll(self) -> list[dict]:
        """Read the source, score and snapshot what is new, commit; returns the poll's events."""
        pts, records = read(self.source)  # raises before anything is written
        total = self.ctx.total_steps
        beyond = pts[pts["step"] > total]
        if not beyond.empty:
            from ladder.imports.wandb_run import InputError

            raise InputError(f"{self.source.describe()}: step {int(beyond['step'].iloc[0])} is beyond the hero's "
                                  f"{total} steps; follow the hero's own run or fix the spec's hero")
        tokens = pd.to_numeric(pts["tokens"], errors="coerce")
        pts = pts.assign(tokens=tokens.fillna(pts["step"] * float(self.ctx.batch_tokens)))
        last = self.state["last_step"]
        new = pts if last is None else pts[pts["step"] > last]
        new = new[new["step"] > 0]
        state = {k: v for k, v in self.state.items()}
        state["polls"] = int(state["polls"]) + 1
        events = alerts.stall(state, not new.empty, self.config.stall, last)
        events += self._metrics(records, state)
        if not new.empty:
            self.out.mkdir(parents=True, exist_ok=True)
            events += alerts.changes_passed(self.changes, last, int(new["step"].max()))
            curve, at = self._current_curve()
            events += alerts.score_points(new, curve, state, at)
            self.points = pts[pts["step"] > 0].reset_index(drop=True)
            summary = self._snapshot(int(self.points["step"].max()))
            state["snapshots"] = state["snapshots"] + [summary]
            events += alerts.forecast_move(summary, state, self.config.alert_move)
            state["last_step"] = int(self.points["step"].max())
        if state["last_step"] is not None and state["last_step"] >= total - 1:
            state["done"] = True  # W&B steps are zero-based: the last eval of an N-step run is at N - 1
        stamp = time.time()
        for e in events:
            e.update({"poll": state["polls"], "time": stamp})
        state["events"] = state["events"] + events
        self._commit(state)
        self._notify()
        return events

    def _metrics(self, records: list[dict], state: dict) -> list[dict]:
        """Envelope and spike alerts on the training metrics logged since the last poll."""
        rows = metric_rows(records, self.ctx.total_steps)
        if rows.empty:
            return []
        last = state.get("last_metric_step")
        new = rows if last is None else rows[rows["step"] > last]
        if new.empty:
            return []
        state["last_metric_step"] = int(new["step"].max())
        return envelope_events(new, self.envelopes, state) + spike_events(new, state)

    def _current_curve(self) -> tuple[pd.DataFrame, int | None]:
        """The latest snapshot's curve, or the rungs-only prior before the first."""
        snaps = self.state["snapshots"]
        if snaps:
            at = int(snaps[-1]["at_step"])
            return pd.read_csv(self.out / layout.FORECAST_DIR / f"{at}.csv"), at
        return self.ctx.prior, None

    def _snapshot(self, at_step: int) -> dict:
        hero = self.points.assign(frac=self.points["step"] / self.ctx.total_steps)
        earlier = [{"at_frac": s["at_frac"], "curve": pd.read_csv(self.out / layout.FORECAST_DIR / f"{s['at_step']}.csv")}
                   for s in self.state["snapshots"] if s["at_step"] < at_step]
        curve, summary = snapshot(self.ctx, hero, at_step, earlier, self.rungs, self.changes)
        layout.write_csv_atomic(self.out / layout.FORECAST_DIR / f"{at_step}.csv", curve)
        return summary

    def _commit(self, state: dict) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        if not self.points.empty:
            rows = point_rows(self.points)
            _write_jsonl_atomic(self.out / POINTS, rows)
            actual = self.out.parent / "imported" / HERO_ACTUAL
            actual.mkdir(parents=True, exist_ok=True)
            _write_jsonl_atomic(actual / layout.METRICS, [{**r, "eval_loss": r["loss"]} for r in rows])
            layout.write_json_atomic(actual / "meta.json", {"name": HERO_ACTUAL, "source": self.source.kind,
                                                            "from": self.source.where, "metric": self.source.metric,
                                                            "rows": len(rows), "followed": True, "imported_at": time.time()})
        state["changes"] = [{"step": c.step, "tokens": c.step * self.ctx.batch_tokens, "what": c.what, "note": c.note,
                             **_effect_note(self.ctx.change_effects, c.step)} for c in self.changes]
        _write_jsonl_atomic(self.out / layout.FORECASTS, state["snapshots"])
        _write_jsonl_atomic(self.out / layout.EVENTS, state["events"])
        layout.write_json_atomic(self.out / STATE, state)
        self.state = state

    def _notify(self) -> None:
        """Run --on-alert once per alert not yet delivered (the count is committed after each)."""
        pending = self.state["events"][self.state["notified"]:]
        for event in pending:
            if event.get("alert") and self.config.on_alert:
                env = {**os.environ, **{f"LADDER_ALERT_{k.upper()}": _env_value(v) for k, v in event.items()}}
                try:  # a hook that hangs must not stop the follow: it gets a poll's time, at least a minute
                    proc = subprocess.run(self.config.on_alert, shell=True, input=json.dumps(event), text=True, env=env,
                                          capture_output=True, timeout=max(60.0, self.config.every_s))
                except subprocess.TimeoutExpired:
                    self.say(f"--on-alert timed out on {event['kind']} at step {event.get('step')}; not retried")
                    proc = None
                if proc is not None and proc.returncode != 0:
                    self.say(f"--on-alert exited {proc.returncode} on {event['kind']} at step {event.get('step')}: "
                             f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}")
            self.state["notified"] += 1
            layout.write_json_atomic(self.out / STATE, self.state)


def point_rows(points: pd.DataFrame) -> list[dict]:
    """The hero's points as rows: step, tokens, loss and the task metrics an eval carried (a row holds only the
    ones its eval logged: a task scored at some evals is absent, not NaN, at the others)."""
    from ladder.imports.wandb_run import is_task_metric

    cols = ["step", "tokens", "loss", *(c for c in points.columns if is_task_metric(c))]
    return [{k: v for k, v in r.items() if k in ("step", "tokens", "loss") or pd.notna(v)}
            for r in points[cols].to_dict("records")]


def _effect_note(effects: tuple, step: int) -> dict:
    """A change's row's word on its replayed rungs' effect (ladder.analysis.change_effect): carried, or why not."""
    e = next((e for e in effects if e["step"] == step), None)
    if e is None:
        return {}
    return {"effect": f"carried: {e['text']}" if e["ok"] else f"not carried ({e['reason']})", "effect_ok": e["ok"]}


def _env_value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _write_jsonl_atomic(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r, default=layout._json_default) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
