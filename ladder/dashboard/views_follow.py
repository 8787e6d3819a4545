"""The dashboard's hero page for a hero followed with `ladder follow` (<root>/<ladder>/follow/)."""

from __future__ import annotations

from pathlib import Path

from ladder.outputs import layout
from ladder.outputs.files import scalars

SHOWN = 12  # snapshot curves drawn: evenly spaced, always the latest


def followed_hero(files, columns, fdir: Path, out: dict) -> None:
    """Fill the hero page's forecasts, snapshots, events and changes from the follow folder."""
    out["forecasts"] = [scalars(f) for f in files.jsonl(fdir / layout.FORECASTS)]
    if not out["forecasts"]:
        return
    fc = out["forecasts"]
    shown = fc if len(fc) <= SHOWN else [fc[round(i * (len(fc) - 1) / (SHOWN - 1))] for i in range(SHOWN)]
    out["snapshots"] = [{"at_step": int(f["at_step"]),
                         **columns(files.csv(fdir / layout.FORECAST_DIR / f"{int(f['at_step'])}.csv"),
                                   ("step", "tokens", "loss", "lower", "upper"))} for f in shown]
    out["events"] = [scalars(e) for e in files.jsonl(fdir / layout.EVENTS)]
    state = files.json(fdir / "state.json", {})
    out["changes"] = (state.get("changes") or []) if isinstance(state, dict) else []


def tokens_per_step(cols: dict) -> float | None:
    """Tokens per step from a page's column arrays (step, tokens), at the last row that has both."""
    steps, tokens = cols.get("step") or [], cols.get("tokens") or []
    pairs = [(s, t) for s, t in zip(steps, tokens, strict=False)
             if isinstance(s, int | float) and isinstance(t, int | float) and s > 0]
    return float(pairs[-1][1]) / float(pairs[-1][0]) if pairs else None


def snapshots_in_tokens(out: dict) -> None:
    """A trained hero's snapshot files are by step: give them tokens, the actual's x unit on the chart."""
    per_step = tokens_per_step(out["eval"]) or tokens_per_step(out["actual"])
    for snap in out["snapshots"]:
        have = any(isinstance(t, int | float) for t in snap.get("tokens") or [])
        if not have and per_step and snap.get("step"):
            snap["tokens"] = [s * per_step for s in snap["step"]]
