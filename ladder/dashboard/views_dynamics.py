"""The MoE page's training-dynamics envelopes for the hero (ladder.analysis.dynamics, as the report
draws them), on the hero's step axis, and the hero's logged steps outside them.

A hero still training has no result.json: its size is the prediction's (the hero's active params)
and its length the progress's total_steps, so its steps are judged while it runs. The envelopes
depend only on the finished rungs and the hero's size: they are kept until a rung's files change.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.analysis.dynamics import METRICS, UPPER_ONLY, envelope, inside, metric_frame
from ladder.outputs import layout, readers
from ladder.outputs.files import JsonlTable, finite, num
from ladder.outputs.root import file_stat


def table_frame(rows: JsonlTable) -> pd.DataFrame:
    """A JSONL table's numeric columns as a frame (the first n rows: the table may grow meanwhile)."""
    n = rows.n
    return pd.DataFrame({k: np.asarray(col[:n], dtype=float) for k, col in rows.cols.items()})


class HeroEnvelopes:
    """Envelopes per (rung files, hero size, level); a view's answer per call."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cache: dict[tuple, dict[str, pd.DataFrame]] = {}

    def __call__(self, views, ladder: str) -> dict | None:
        """{"hero", "level", "total_steps", "metrics": {metric: {"upper_only", "envelope", "outside", "inside",
        "points"}}} for the ladder's hero, or None (no hero, its size or length unknown, fewer than 3 rungs)."""
        dirs = views.step_dirs(ladder)
        hero_dir = views.hero_dir(dirs)
        if hero_dir is None:
            return None
        hero = next(name for name, d in dirs.items() if d == hero_dir)
        pd_ = dirs.get("predict")
        pred = readers.hero_prediction(views.files.json(pd_ / layout.PREDICTION, {}) if pd_ is not None else {})
        result = views.files.json(hero_dir / layout.RESULT, {}) or {}
        progress = views.files.json(hero_dir / layout.PROGRESS, {}) or {}
        size = num(result.get("params_active")) or num(pred.get("params"))
        total = num(result.get("total_steps")) or num(progress.get("total_steps"))
        if not size or not total:
            return None
        level = num(pred.get("level")) or 0.9
        rungs = {n: d for n, d in views.training_steps(ladder).items() if d != hero_dir}
        envs = self._envelopes(views.files, rungs, float(size), float(level))
        if not envs:
            return None
        frame = metric_frame(table_frame(views.files.jsonl(hero_dir / layout.METRICS)), int(total))
        out = {}
        for metric, env in envs.items():
            scored = inside(frame, env, metric) if not frame.empty else pd.DataFrame()
            miss = scored[~scored["inside"]] if not scored.empty else scored
            if len(miss) > views.max_points:  # the chart's markers, thinned like its series
                miss = miss.iloc[np.linspace(0, len(miss) - 1, views.max_points).round().astype(int)]
            out[metric] = {"upper_only": metric in UPPER_ONLY,
                           # the API writes strict JSON: a non-finite edge would fail the whole page
                           "envelope": [{k: finite(float(v)) for k, v in row.items()} for row in
                                        env[["frac_lo", "frac_hi", "centre", "lower", "upper"]].to_dict("records")],
                           "points": int(len(scored)), "inside": float(scored["inside"].mean()) if len(scored) else None,
                           "outside": {"step": [int(s) for s in miss.get("step", [])],
                                       "value": [float(v) for v in miss.get("value", [])]}}
        return {"hero": hero, "level": level, "total_steps": int(total), "metrics": out}

    def _envelopes(self, files, rungs: dict[str, Path], size: float, level: float) -> dict[str, pd.DataFrame]:
        key = (size, level, *((n, str(d), file_stat(d / layout.METRICS), file_stat(d / layout.RESULT)) for n, d in rungs.items()))
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        frames = []
        for name, d in rungs.items():
            result = files.json(d / layout.RESULT, {}) or {}
            n, total = num(result.get("params_active")), num(result.get("total_steps"))
            if not n or not total:
                continue  # a rung still training has no size-and-length to place it by
            f = metric_frame(table_frame(files.jsonl(d / layout.METRICS)), int(total))
            if not f.empty:
                frames.append((name, float(n), f))
        envs = {}
        if len(frames) >= 3:
            envs = {m: e for m in METRICS if not (e := envelope(frames, size, m, level)).empty}
        with self._lock:
            if len(self._cache) > 32:
                self._cache.clear()
            self._cache[key] = envs
        return envs
