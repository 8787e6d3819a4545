"""The ladder's tables as CSV downloads (the dashboard's Tables page): every file a user may want,
and the tables the views compute (fit parameters with intervals, band exits), never thinned."""

from __future__ import annotations

from ladder.dashboard.views import Views
from ladder.dashboard.views_compare import CompareView
from ladder.outputs import layout, readers
from ladder.outputs.files import safe_name, scalars
from ladder.outputs.root import _is_training


class Root(Views, CompareView):
    """A ladder root: its ladders, their views (the Compare page's in views_compare) and their tables (read-only)."""

    def tables(self, ladder: str) -> list[dict]:
        """The downloadable tables of a ladder: name, title, rows (cheap to list, read on demand)."""
        names = [("steps", "steps: status, progress and result of every step")]
        dirs = self.step_dirs(ladder)
        for step, d in dirs.items():
            if _is_training(step, d):
                for kind, fname in (("metrics", layout.METRICS), ("eval", layout.EVAL), ("events", layout.EVENTS)):
                    if (d / fname).exists():
                        names.append((f"{kind}.{step}", f"{step}: {fname}"))
        if "fit" in dirs:
            names += [("runs", "fit: the runs fitted (runs.csv)"), ("fit_params", "fit: law parameters and intervals"),
                      ("backtest", "fit: backtest"), ("law_curve", "fit: the law over compute, with its band")]
        if "predict" in dirs:
            names += [("hero_curve", "predict: the hero's predicted curve and band"),
                      ("targets", "predict: extra targets")]
            if (dirs["predict"] / readers.BASELINE_MARIN_CSV).exists():
                names.append(("baseline_marin", "predict: Marin's method's hero curve (the baseline)"))
        hd = self.hero_dir(dirs)
        if hd is not None:
            names += [("forecasts", "hero: forecast snapshots")]
            fdir = hd / layout.FORECAST_DIR
            if fdir.is_dir():
                for p in sorted((p for p in fdir.glob("*.csv") if p.stem.isdigit()), key=lambda p: int(p.stem)):
                    names.append((f"forecast.{p.stem}", f"hero: forecast made at step {p.stem}"))
        for name in self.imported(ladder):
            names.append((f"imported.{name}", f"imported run {name}"))
        if "predict" in dirs and (hd is not None or any(n.startswith("hero") for n in self.imported(ladder))):
            names += [("hero_points", "hero: each actual point against the forecast (ours and Marin's)"),
                      ("band_exits", "hero: points outside the band")]
        return [{"name": n, "title": t} for n, t in names]

    def table(self, ladder: str, name: str) -> list[dict] | None:
        """Rows of one named table, or None when there is no such table."""
        if not safe_name(name) or self.ladder_dir(ladder) is None:
            return None
        dirs = self.step_dirs(ladder)
        kind, _, arg = name.partition(".")
        if name == "steps":
            rows = []
            for s in self.overview(ladder)["steps"]:
                row = {"step": s["name"], "status": s["status"], "kind": s["kind"], "start": s.get("start"),
                       "end": s.get("end"), "dir": s.get("dir")}
                row.update({f"progress.{k}": v for k, v in s["progress"].items()})
                row.update({f"result.{k}": v for k, v in s["result"].items()})
                rows.append(row)
            return rows
        if kind in ("metrics", "eval", "events") and arg:
            d = dirs.get(arg)
            if d is None:
                return None
            fname = {"metrics": layout.METRICS, "eval": layout.EVAL, "events": layout.EVENTS}[kind]
            return [scalars(r) for r in self.files.jsonl(d / fname)]
        if name == "runs" and "fit" in dirs:
            return self.files.csv(dirs["fit"] / layout.RUNS_CSV)
        if name in ("fit_params", "backtest", "law_curve"):
            view = self.fit(ladder)
            return {"fit_params": view["params"], "backtest": view["backtest"], "law_curve": view["curve"]}[name]
        if name in ("hero_curve", "targets", "baseline_marin") and "predict" in dirs:
            fname = {"hero_curve": layout.HERO_CURVE, "targets": layout.TARGETS_CSV,
                     "baseline_marin": readers.BASELINE_MARIN_CSV}[name]
            return self.files.csv(dirs["predict"] / fname)
        hd = self.hero_dir(dirs)
        if name == "forecasts" and hd is not None:
            return [scalars(r) for r in self.files.jsonl(hd / layout.FORECASTS)]
        if name in ("band_exits", "hero_points"):
            comparisons = self.hero_comparisons(ladder)
            if not comparisons:
                return None
            return [{"run": run, **p} for run, c in comparisons.items()
                    for p in (readers.exits(c["points"]) if name == "band_exits" else c["points"])]
        if kind == "forecast" and arg.isdigit() and hd is not None:
            p = hd / layout.FORECAST_DIR / f"{arg}.csv"
            return self.files.csv(p) if p.is_file() else None
        if kind == "imported" and arg:
            d = self.imported(ladder).get(arg)
            return None if d is None else [scalars(r) for r in self.files.jsonl(d / layout.METRICS)]
        return None
