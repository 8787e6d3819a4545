"""The comparison's figures (plotly JSON): B's effect against A per size with its bands, the trend out to the
hero with its band, the hero's predicted effect and the heroes' measured one. Drawn by the comparison page
(ladder.report.compare_page) and the dashboard's Compare page (ladder.dashboard.views_compare) alike.
"""

from __future__ import annotations

from ladder.report import figures

EFFECT, TREND, HERO = "#1f77b4", "#d62728", "#111111"


def _errors(rows: list[dict], key: str, lo: str, hi: str) -> dict:
    return {"type": "data", "symmetric": False, "array": [r[hi] - r[key] for r in rows],
            "arrayminus": [r[key] - r[lo] for r in rows], "color": EFFECT}


def _points(effect: dict, key: str, lo: str, hi: str, measured_name: str) -> list[dict]:
    """The per-size points of `key` with their bands, the hero's predicted one and the heroes' measured one."""
    rows, hero, measured = effect["per_size"], effect.get("at_hero"), effect.get("heroes")
    data = [{"x": [r["flops_b"] for r in rows], "y": [r[key] for r in rows], "mode": "markers",
             "marker": {"color": EFFECT, "size": 9}, "text": [r["size"] for r in rows], "name": "per size",
             "error_y": _errors(rows, key, lo, hi)}]
    if hero:
        data.append({"x": [hero["flops"]], "y": [hero[key]], "mode": "markers", "name": "at the hero (predicted)",
                     "marker": {"color": TREND, "size": 11, "symbol": "diamond"},
                     "error_y": _errors([hero], key, lo, hi) | {"color": TREND}})
    if measured and hero:
        data.append({"x": [hero["flops"]], "y": [measured[key]], "mode": "markers", "name": measured_name,
                     "marker": {"color": HERO, "size": 11, "symbol": "x"}})
    return data


def multiplier_figure(effect: dict) -> dict:
    """Per-size multipliers with their bands, the trend's line and band out to the hero, the hero's
    predicted multiplier and the heroes' measured one."""
    curve = effect["trend"]["curve"]
    data = figures._band([c["flops"] for c in curve], [c["lower"] for c in curve], [c["upper"] for c in curve],
                         "trend band", "rgba(214,39,40,0.15)", "trend")
    data.append({"x": [c["flops"] for c in curve], "y": [c["multiplier"] for c in curve], "mode": "lines",
                 "line": {"color": TREND}, "name": "trend (fitted on the sizes)", "legendgroup": "trend"})
    hero = effect.get("at_hero")
    if hero:  # where one measured pair of heroes should land: the band widened by their own seed luck
        data.append({"x": [hero["flops"], hero["flops"]], "y": [hero["pair_lower"], hero["pair_upper"]],
                     "mode": "lines", "line": {"color": TREND, "width": 1, "dash": "dot"},
                     "name": "one pair of heroes (their own luck too)"})
    data += _points(effect, "multiplier", "lower", "upper", "heroes (measured)")
    lay = figures._layout("B's compute (FLOPs)", "compute-equivalent multiplier (>1: B better)",
                          yaxis={"type": "log"},
                          shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                                   "line": {"color": "#888", "dash": "dot", "width": 1}}])
    return {"data": data, "layout": lay}


def delta_figure(effect: dict) -> dict:
    """Per-size loss differences with their bands, the hero's predicted difference and the heroes' actual one."""
    data = _points(effect, "delta", "delta_lower", "delta_upper", "heroes (actual)")
    lay = figures._layout("B's compute (FLOPs)", "final loss, B minus A (<0: B better)",
                          shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 0, "y1": 0,
                                   "line": {"color": "#888", "dash": "dot", "width": 1}}])
    return {"data": data, "layout": lay}
