"""The report's static figures (PNGs, matplotlib): rung curves, the law and its band, the hero's
predicted against actual curve. Kept beside report.html's interactive plots for notebooks and
slides; the numbers come from the report's own tables."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.outputs import layout


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:  # an empty figure (nothing recorded yet) has no legend to draw
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


STAMP = ".figures.json"  # the inputs' digest and the files drawn from them


def _inputs_digest(rep: dict[str, Any], tables: dict[str, pd.DataFrame], fit_dir: str | None) -> str:
    """sha256 of everything a figure is drawn from: the tables, the hero's row, the fit's CSVs and
    matplotlib's version."""
    import matplotlib

    h = hashlib.sha256(f"matplotlib {matplotlib.__version__}\n".encode())
    h.update(json.dumps(rep.get("hero") or {}, sort_keys=True, default=str).encode())
    for key in sorted(tables):
        h.update(f"\n{key}\n".encode() + tables[key].to_csv(index=False).encode())
    for name in (layout.RUNS_CSV, "law_curve.csv"):
        path = Path(fit_dir) / name if fit_dir else None
        h.update(f"\n{name}\n".encode() + (path.read_bytes() if path and path.exists() else b""))
    return h.hexdigest()


def write_pngs(rep: dict[str, Any], tables: dict[str, pd.DataFrame], out_dir: Path, fit_dir: str | None) -> list[Path]:
    """The figures, redrawn only when what they are drawn from changed: matplotlib takes about a
    second a figure, and `ladder report` on a finished ladder (the dashboard, a script polling it)
    would otherwise redraw the same three each time."""
    digest = _inputs_digest(rep, tables, fit_dir)
    stamp = layout.read_json(out_dir / STAMP, {}) or {}
    if stamp.get("inputs") == digest and all((out_dir / f).exists() for f in stamp.get("files", [])):
        return [out_dir / f for f in stamp["files"]]
    paths = _draw(rep, tables, out_dir, fit_dir)
    layout.write_json_atomic(out_dir / STAMP, {"inputs": digest, "files": [p.name for p in paths]})
    return paths


def _draw(rep: dict[str, Any], tables: dict[str, pd.DataFrame], out_dir: Path, fit_dir: str | None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, frame in tables.items():
        if key.startswith("eval/") and not frame.empty and "eval_loss" in frame:
            ax.plot(frame["tokens"], frame["eval_loss"], marker="o", ms=3, label=key[5:])
    ax.set_xscale("log")
    paths.append(_finish(fig, ax, "tokens", "eval loss (nats/byte)", "rungs and hero: eval loss", out_dir / "rung_curves.png"))

    runs_csv = Path(fit_dir) / layout.RUNS_CSV if fit_dir else None
    law_csv = Path(fit_dir) / "law_curve.csv" if fit_dir else None
    if runs_csv and runs_csv.exists():
        runs = pd.read_csv(runs_csv)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        kinds = runs["kind"] if "kind" in runs else pd.Series("final", index=runs.index)
        finals, branches = runs[kinds == "final"], runs[kinds == "branch"]
        ax.scatter(finals["flops"], finals["loss"], color="k", zorder=3, label="rungs (final)")
        if not branches.empty:
            ax.scatter(branches["flops"], branches["loss"], color="0.5", marker="^", zorder=3, label="rungs (cooldown branches)")
        if law_csv and law_csv.exists():
            law = pd.read_csv(law_csv)
            ax.plot(law["flops"], law["loss"], color="C0", label="fitted law")
            ax.fill_between(law["flops"], law["lower"], law["upper"], color="C0", alpha=0.2, label="interval")
        pred_flops = (rep.get("hero") or {}).get("flops")
        if pred_flops:
            h = rep["hero"]
            ax.errorbar([pred_flops], [h["predicted_final_loss"]],
                        yerr=[[h["predicted_final_loss"] - h["lower"]], [h["upper"] - h["predicted_final_loss"]]],
                        fmt="s", color="C1", label="hero predicted")
            if h.get("actual_final_loss") is not None:
                ax.scatter([pred_flops], [h["actual_final_loss"]], marker="*", s=120, color="C3", zorder=4, label="hero actual")
        ax.set_xscale("log")
        ax.set_yscale("log")
        paths.append(_finish(fig, ax, "training FLOPs", "final eval loss", "the law and its band", out_dir / "law.png"))

    comp = tables.get("hero_curve")
    if comp is None:  # a hero recorded elsewhere (import-wandb --as hero_actual)
        comp = next((f for k, f in tables.items() if k.startswith("actual/")), None)
    pred = tables.get("hero_predicted_curve")
    if pred is not None and not pred.empty:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.plot(pred["step"], pred["loss"], color="C0", label="predicted")
        ax.fill_between(pred["step"], pred["lower"], pred["upper"], color="C0", alpha=0.2, label="band")
        if comp is not None and not comp.empty:
            ax.plot(comp["step"], comp["actual"], color="C3", label="actual (interval means)")
            out = comp[~comp["inside"]]
            ax.scatter(out["step"], out["actual"], color="C3", marker="x", s=14, label="outside the band")
        second = tables.get("hero_curve_law")
        if second is not None and not second.empty:
            ax.plot(second["step"], second["predicted"], color="C2", ls="--", label="whole-curve law (second estimate)")
        lo = float(np.nanmin(pred["lower"])) if len(pred) else 0
        ax.set_ylim(lo * 0.97, float(np.nanquantile(pred["upper"], 0.9)) * 1.15)
        paths.append(_finish(fig, ax, "hero step", "train loss", "hero: predicted vs actual", out_dir / "hero.png"))
    return paths
