"""The dashboard's views of one ladder (overview, rungs, fit, hero, MoE health), as JSON-ready dicts.

Read-only and tolerant (see ladder.outputs.files). Every number shared with the report comes from
ladder.outputs.readers, so the two cannot disagree.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from fits.laws.registry import is_power_law_in_compute
from ladder.dashboard.views_dynamics import HeroEnvelopes
from ladder.dashboard.views_follow import followed_hero, snapshots_in_tokens
from ladder.outputs import layout, readers
from ladder.outputs.files import JsonlTable, finite, natural_key, num, scalars
from ladder.outputs.root import ANALYSIS_STEPS, IMPORTED_META, LAW_CURVE_CSV, LadderRoot, _kind

MAX_POINTS = 2000  # per chart series; CSV downloads are never thinned
STALE_HEARTBEAT_S = 180.0
MOE_KEYS = ("expert_load_max_over_mean", "drop_rate", "routing_entropy", "grad_norm")


class Views(LadderRoot):
    """A ladder root with the dashboard's views of each ladder."""

    def __init__(self, path: str | Path, max_points: int = MAX_POINTS):
        super().__init__(path)
        self.max_points = max_points
        self.envelopes = HeroEnvelopes()

    def summary(self) -> dict:
        ladders = []
        for name in self.ladders():
            steps = self.overview(name)["steps"]
            counts: dict[str, int] = {}
            for s in steps:
                counts[s["status"]] = counts.get(s["status"], 0) + 1
            ladders.append({"name": name, "steps": len(steps), "counts": counts})
        return {"root": str(self.path), "ladders": ladders, "time": time.time()}

    def overview(self, ladder: str) -> dict:
        dirs = self.step_dirs(ladder)
        steps = []
        now = time.time()
        for name, d in dirs.items():
            status = self.files.json(d / layout.STATUS, {}) or {}
            if not isinstance(status, dict):
                status = {}
            progress = self.files.json(d / layout.PROGRESS, {}) or {}
            result = self.files.json(d / layout.RESULT, {}) or {}
            state = str(status.get("status") or ("SUCCESS" if result else "RUNNING" if progress else "PENDING"))
            hb = _epoch(status.get("heartbeat"))
            steps.append({
                "name": name,
                "kind": _kind(name, d),
                "status": state,
                "start": readers.started(status, progress),
                "queued": status.get("start"),
                "end": status.get("end"),
                "tokens_per_s": readers.tokens_per_s(progress, result),
                "heartbeat": status.get("heartbeat"),
                "stale": bool(state == "RUNNING" and hb is not None and now - hb > STALE_HEARTBEAT_S),
                "progress": scalars(progress) if isinstance(progress, dict) else {},
                "result": scalars(result) if isinstance(result, dict) else {},
                "dir": d.name,
                "error": _scalar_str(status.get("error") or status.get("reason")),
            })
        names = [s["name"] for s in steps]
        rungs = [n for n in names if n not in ANALYSIS_STEPS]
        if rungs:  # the analysis chain is always part of a ladder; show what has not started yet
            recorded = [n for n in self.imported(ladder) if n.startswith("hero")]
            for a in ANALYSIS_STEPS:
                if a not in names and not (a == "hero" and self.hero_dir(dirs) is not None):
                    # a hero trained elsewhere is there once its recorded curve is imported
                    state = "IMPORTED" if a == "hero" and recorded else "PENDING"
                    steps.append({"name": a, "kind": "train" if a == "hero" else "analysis", "status": state,
                                  "progress": {}, "result": {}, "dir": None, "stale": False,
                                  "error": f"trained elsewhere: imported {', '.join(recorded)}" if state == "IMPORTED" else None})
        edges = self._edges(dirs, [s["name"] for s in steps])
        return {"ladder": ladder, "time": now, "steps": steps, "edges": edges}

    def _edges(self, dirs: dict[str, Path], names: list[str]) -> list[list[str]]:
        present = set(names)
        edges: list[list[str]] = []
        declared = False
        for name, d in dirs.items():
            info = self.files.json(d / layout.STEP_JSON, {}) or {}
            deps = info.get("deps") if isinstance(info, dict) else None
            if deps is None and isinstance(info, dict):
                deps = info.get("dependencies")
            dep_names: list[str] = []
            if isinstance(deps, dict):
                dep_names = list(deps.keys())
            elif isinstance(deps, list):
                for x in deps:
                    if isinstance(x, str):
                        dep_names.append(Path(x).name.rsplit("-", 1)[0] if "/" in x else x)
                    elif isinstance(x, dict) and isinstance(x.get("name"), str):
                        dep_names.append(x["name"])
            if dep_names:
                declared = True
            for dep in dep_names:
                if dep in present and dep != name:
                    edges.append([dep, name])
        if declared:
            # steps not started yet declare nothing: add the canonical edges into them
            have_into = {b for _, b in edges}
            edges += [e for e in _canonical_edges(names) if e[1] not in have_into]
            return edges
        return _canonical_edges(names)

    def rungs(self, ladder: str) -> dict:
        runs = []
        domains: set[str] = set()
        for name, d in self.training_steps(ladder).items():
            metrics = self.files.jsonl(d / layout.METRICS)
            evals = self.files.jsonl(d / layout.EVAL)
            status = self.files.json(d / layout.STATUS, {}) or {}
            result = self.files.json(d / layout.RESULT, {}) or {}
            ev_series = {}
            for key in _keys(evals):
                if key == "eval_loss" or key.startswith("eval_loss/"):
                    ev_series[key] = key
                    if key.startswith("eval_loss/"):
                        domains.add(key.split("/", 1)[1])
            runs.append({
                "name": name,
                "hero": name == "hero",
                "status": (status.get("status") if isinstance(status, dict) else None) or "",
                "result": scalars(result) if isinstance(result, dict) else {},
                "train": self._columns(metrics, ("step", "tokens", "flops", "loss")),
                "eval": self._columns(evals, ("step", "tokens", "flops", *sorted(ev_series))),
            })
        imported = []
        for name, d in self.imported(ladder).items():
            rows = self.files.jsonl(d / layout.METRICS)
            cols = [k for k in _keys(rows) if k in ("step", "tokens", "flops") or "loss" in k]
            imported.append({"name": name, "meta": scalars(self.files.json(d / IMPORTED_META, {}) or {}),
                             "train": self._columns(rows, tuple(cols))})
        return {"ladder": ladder, "runs": runs, "domains": sorted(domains), "imported": imported}

    def fit(self, ladder: str) -> dict:
        dirs = self.step_dirs(ladder)
        out: dict[str, Any] = {"ladder": ladder, "runs": [], "law": None, "curve": [], "hero": None,
                               "targets": [], "backtest": [], "params": []}
        fd = dirs.get("fit")
        fitj: dict = {}
        if fd is not None:
            fitj = self.files.json(fd / layout.FIT, {}) or {}
            out["runs"] = self.files.csv(fd / layout.RUNS_CSV)
            if not isinstance(fitj, dict):
                fitj = {}
            law = readers.find_law(fitj)
            if law is not None:
                out["law"] = {"law": law.get("law"), "compute_law": is_power_law_in_compute(law.get("law")),
                              "params": law.get("params"), "ci": law.get("ci"),
                              "n_points": law.get("n_points"), "objective": law.get("objective")}
            out["params"] = readers.param_rows(fitj)
            out["backtest"] = readers.backtest_rows(fitj)
        pd_ = dirs.get("predict")
        pred = {}
        if pd_ is not None:
            pred = self.files.json(pd_ / layout.PREDICTION, {}) or {}
            if not isinstance(pred, dict):
                pred = {}
            hero_name = readers.hero_prediction(pred).get("name") or "hero"
            out["targets"] = [r for r in self.files.csv(pd_ / layout.TARGETS_CSV)
                              if isinstance(r, dict) and r.get("name") != hero_name]
            curve = self.files.csv(pd_ / layout.HERO_CURVE)
            h = readers.hero_prediction(pred)
            hero_flops = num(h.get("flops"))
            if hero_flops is None and curve:
                hero_flops = num(curve[-1].get("flops"))
            pl = num(h.get("predicted_final_loss"))
            if pl is not None and hero_flops is not None:
                out["hero"] = {"flops": hero_flops, "loss": pl, "lower": num(h.get("lower")),
                               "upper": num(h.get("upper")), "level": num(h.get("level")),
                               "name": h.get("name") or "hero"}
            hero_dir = self.hero_dir(dirs)
            if out["hero"] is not None and hero_dir is not None:
                res = self.files.json(hero_dir / layout.RESULT, {}) or {}
                if isinstance(res, dict) and res.get("status", "SUCCESS") == "SUCCESS":
                    out["hero"]["actual"] = next((num(res.get(k)) for k in
                                                  ("final_eval_loss", "final_loss", "final_train_loss", "loss")
                                                  if num(res.get(k)) is not None), None)
        # the backtest's target point: place it at its rung's compute
        by_name = {r.get("name"): r for r in out["runs"] if isinstance(r, dict)}
        for b in out["backtest"]:
            target = by_name.get(b.get("predict") or b.get("name"))
            if target is not None and "flops" not in b:
                b["flops"] = num(target.get("flops"))
        out["curve"] = self._law_curve(fd, out, fitj)
        out["prediction"] = scalars(pred)
        return out

    def _law_curve(self, fd: Path | None, view: dict, fitj: dict) -> list[dict]:
        """The fitted law over the compute range, with its band: from curves.csv, else evaluated."""
        if fd is not None:
            for fname in (LAW_CURVE_CSV, layout.CURVES_CSV):
                rows = self.files.csv(fd / fname)
                if rows and "flops" in rows[0] and "loss" in rows[0]:
                    return rows
        law = readers.find_law(fitj)
        if not law:
            return []
        params = law.get("params") or {}
        E, A, alpha = (num(params.get(k)) for k in ("E", "A", "alpha"))
        if None in (E, A, alpha) or not is_power_law_in_compute(law.get("law")):
            return []
        xs = [num(r.get("flops")) for r in view["runs"]]
        xs += [num(t.get("flops")) for t in view["targets"]]
        if view["hero"]:
            xs.append(view["hero"]["flops"])
        xs = [x for x in xs if x and x > 0]
        if not xs:
            return []
        lo, hi = math.log10(min(xs)) - 0.3, math.log10(max(xs)) + 0.3
        grid = [10 ** (lo + (hi - lo) * i / 80) for i in range(81)]
        samples = law.get("samples") or {}
        sample_sets = []
        if all(isinstance(samples.get(k), list) for k in ("E", "A", "alpha")):
            sample_sets = [(num(e), num(a), num(al)) for e, a, al in
                           zip(samples["E"], samples["A"], samples["alpha"], strict=False)]
            sample_sets = [s for s in sample_sets if None not in s]
        level = readers.fit_level(fitj)
        rows = []
        for c in grid:
            row = {"flops": c, "loss": E + A * c ** -alpha}
            if len(sample_sets) >= 5:
                vals = [e + a * c ** -al for e, a, al in sample_sets]
                row["lower"], row["upper"] = (float(v) for v in np.quantile(vals, [(1 - level) / 2, 1 - (1 - level) / 2]))
            rows.append(row)
        return rows

    def hero(self, ladder: str) -> dict:
        dirs = self.step_dirs(ladder)
        out: dict[str, Any] = {"ladder": ladder, "predicted": {}, "actual": {}, "eval": {}, "forecasts": [],
                               "snapshots": [], "exits": [], "prediction": {}, "status": "", "imported": []}
        pd_ = dirs.get("predict")
        predicted = []
        if pd_ is not None:
            predicted = self.files.csv(pd_ / layout.HERO_CURVE)
            pred = self.files.json(pd_ / layout.PREDICTION, {}) or {}
            out["prediction"] = scalars(readers.hero_prediction(pred))
        out["predicted"] = self._columns(predicted, ("step", "tokens", "flops", "loss", "lower", "upper"))
        hd = self.hero_dir(dirs)
        if hd is not None:
            status = self.files.json(hd / layout.STATUS, {}) or {}
            out["status"] = status.get("status", "") if isinstance(status, dict) else ""
            metrics = self.files.jsonl(hd / layout.METRICS)
            evals = self.files.jsonl(hd / layout.EVAL)
            out["actual"] = self._columns(metrics, ("step", "tokens", "flops", "loss"))
            out["eval"] = self._columns(evals, ("step", "tokens", "flops", "eval_loss"))
            forecasts = self.files.jsonl(hd / layout.FORECASTS)
            out["forecasts"] = [scalars(f) for f in forecasts]
            snaps = []
            fdir = hd / layout.FORECAST_DIR
            if fdir.is_dir():
                files = sorted((p for p in fdir.glob("*.csv") if p.stem.isdigit()), key=lambda p: int(p.stem))
                if len(files) > 12:  # keep the chart readable: 12 evenly spaced, always the latest
                    idx = sorted({round(i * (len(files) - 1) / 11) for i in range(12)})
                    files = [files[i] for i in idx]
                for p in files:
                    rows = self.files.csv(p)
                    snaps.append({"at_step": int(p.stem),
                                  **self._columns(rows, ("step", "tokens", "loss", "lower", "upper"))})
            out["snapshots"] = snaps
        if pd_ is not None and not out["forecasts"]:
            followed_hero(self.files, self._columns, pd_.parent / "follow", out)
        snapshots_in_tokens(out)
        imported = self.imported(ladder)
        for name, d in imported.items():
            rows = self.files.jsonl(d / layout.METRICS)
            out["imported"].append({"name": name, **self._columns(rows, ("step", "tokens", "loss"))})
        if pd_ is not None:
            out["baseline"] = self._columns(self.files.csv(pd_ / readers.BASELINE_MARIN_CSV),
                                            ("step", "tokens", "frac", "loss"))
        out["comparisons"] = self._comparisons(self.hero_comparisons(ladder))
        first = next(iter(out["comparisons"].values()), None)
        out["exits"], out["tasks"] = (first["exits"] if first else []), readers.hero_tasks(self.files, dirs.get("report"))
        return out

    def hero_comparisons(self, ladder: str) -> dict[str, dict]:
        dirs = self.step_dirs(ladder)
        return readers.hero_comparisons(self.files, dirs.get("predict"), self.hero_dir(dirs), self.imported(ladder))

    def hero_dir(self, dirs: dict[str, Path]) -> Path | None:
        """The hero step's directory: the step prediction.json names as the hero (Marin's is d6144), else "hero"."""
        pd_ = dirs.get("predict")
        pred = self.files.json(pd_ / layout.PREDICTION, {}) if pd_ is not None else {}
        name = readers.hero_prediction(pred).get("name") if isinstance(pred, dict) else None
        return dirs.get(name) if isinstance(name, str) and name in dirs else dirs.get("hero")

    def _comparisons(self, comparisons: dict[str, dict]) -> dict[str, dict]:
        """Each comparison's summary, band exits and per-point errors (thinned for the charts)."""
        out = {}
        for name, cmp in comparisons.items():
            pts = cmp["points"]
            out[name] = {"summary": {k: v for k, v in readers.summary(cmp).items() if k != "last"},
                         "exits": readers.exits(pts), "stretches": readers.exit_stretches(pts),
                         "points": self._columns(pts, ("step", "tokens", "loss", "predicted", "lower", "upper",
                                                       "error", "marin", "marin_error"))}
        return out

    def moe(self, ladder: str) -> dict:
        runs = []
        for name, d in self.training_steps(ladder).items():
            metrics = self.files.jsonl(d / layout.METRICS)
            keys = _keys(metrics)
            bias = sorted((k for k in keys if k.startswith("router_bias_norm_l")), key=natural_key)
            health = [k for k in MOE_KEYS if k in keys]
            events = [scalars(e) for e in self.files.jsonl(d / layout.EVENTS)]
            runs.append({"name": name, "bias_keys": bias, "health_keys": health,
                         "series": self._columns(metrics, ("step", "tokens", *bias, *health, "loss")),
                         "events": events})
        return {"ladder": ladder, "runs": runs, "dynamics": self.envelopes(self, ladder)}

    # -- helpers -----------------------------------------------------------------------------

    def _columns(self, rows, keys) -> dict[str, list]:
        """Column arrays of ``rows`` (a JsonlTable or a list of dicts) for ``keys``, thinned to at
        most max_points rows, always keeping the last; non-numbers and NaN are None."""
        n = len(rows)
        idx = list(range(n))
        if n > self.max_points:
            stride = math.ceil(n / self.max_points)
            idx = idx[::stride] + ([n - 1] if (n - 1) % stride else [])
        out: dict[str, list] = {}
        if isinstance(rows, JsonlTable):
            for k in keys:
                col = rows.cols.get(k)
                if col is None:
                    continue
                vals = [col[i] for i in idx]
                vals = [None if v != v or v in (math.inf, -math.inf) else v for v in vals]
                if any(v is not None for v in vals):
                    out[k] = vals
        else:
            sel = [rows[i] for i in idx]
            for k in keys:
                col = [finite(v) if isinstance(v := r.get(k), int | float) and not isinstance(v, bool) else None
                       for r in sel]
                if any(v is not None for v in col):
                    out[k] = col
        out["n"] = n
        return out


def _canonical_edges(names: list[str]) -> list[list[str]]:
    present = set(names)
    rungs = [n for n in names if n not in ANALYSIS_STEPS]
    edges = [[r, "fit"] for r in rungs if "fit" in present]
    chain = [("fit", "predict"), ("predict", "gate"), ("gate", "hero"), ("hero", "report"),
             ("fit", "report"), ("predict", "report")]
    edges += [[a, b] for a, b in chain if a in present and b in present]
    return edges


def _epoch(x: Any) -> float | None:
    v = num(x)
    if v is not None:
        return v
    if isinstance(x, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _scalar_str(x: Any) -> str | None:
    if x is None:
        return None
    return x if isinstance(x, str) else json.dumps(x, default=str)[:500]


def _keys(rows) -> list[str]:
    if isinstance(rows, JsonlTable):
        return rows.keys()
    seen: dict[str, None] = {}
    for r in rows[:50] + rows[-50:]:
        for k in r:
            seen.setdefault(k, None)
    return list(seen)


