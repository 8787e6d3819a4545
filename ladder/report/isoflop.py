"""The IsoFLOP stage's part of the ladder's report: each budget's optimum and the frontier's laws."""

from __future__ import annotations

import math
from pathlib import Path

from ladder.outputs import layout

BUDGET_KEYS = ("index", "flops", "n_opt", "d_opt", "loss_opt", "tokens_per_param", "tokens_opt",
               "trained_tokens_per_param", "n_opt_lower", "n_opt_upper",
               "d_opt_lower", "d_opt_upper", "loss_opt_lower", "loss_opt_upper", "runs", "best_run")


def section(isoflop_dir: str) -> dict | None:
    """report["isoflop"]: budgets (flops, n_opt, d_opt, loss_opt, their intervals, the best run) and fit (the
    exponents a, b and alpha with their intervals, and the laws' scales), from the isoflop step's isoflop.json."""
    doc = layout.read_json(Path(isoflop_dir) / layout.ISOFLOP_JSON)
    if not doc:
        return None
    return {"budgets": [{k: b.get(k) for k in BUDGET_KEYS} for b in doc["budgets"]], "fit": doc["fit"],
            "level": doc.get("level"), "interval": doc.get("interval"), "law": doc.get("law"),
            "dropped_budgets": doc.get("dropped_budgets", [])}


def lines(iso: dict | None) -> list[str]:
    """The report's text for the frontier."""
    if not iso:
        return []

    def fmt(x, spec=".3g"):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    fit = iso["fit"]
    level = fmt((iso.get("level") or 0.9) * 100, ".0f")
    out = ["", f"isoflop frontier ({level}% intervals, {iso.get('interval')}):"]
    for k, what in (("a", "N_opt ~ C^a"), ("b", "D_opt ~ C^b"), ("alpha", "L_opt - E ~ C^-alpha")):
        p = fit.get(k) or {}
        if p.get("value") is None:  # L_opt(C) is fit only from 3 budgets on
            continue
        out.append(f"  {what}: {k} = {fmt(p.get('value'), '.3f')} [{fmt(p.get('lower'), '.3f')}, {fmt(p.get('upper'), '.3f')}]")
    for b in iso["budgets"]:
        out.append(f"  C {fmt(b['flops'])}: N_opt {fmt(b['n_opt'])} [{fmt(b['n_opt_lower'])}, {fmt(b['n_opt_upper'])}], "
                   f"D_opt {fmt(b['d_opt'])} (C/6N), {fmt(b.get('trained_tokens_per_param'), '.0f')} tokens/param as trained, "
                   f"L_opt {fmt(b['loss_opt'], '.4f')}, best run {b['best_run']}")
    if iso.get("dropped_budgets"):
        out.append(f"  budgets without a minimum inside their sizes (left out): {iso['dropped_budgets']}")
    return out
