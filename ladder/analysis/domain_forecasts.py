"""Per-domain forecasts: every eval domain the rungs recorded gets its own rungs-only hero curve and
band (the chosen curve law, refitted on that domain's points; the band from the domain's own
calibration backtests, fits.matched_progress_forecast.forecast), and its backtest (the largest rung from
the others), scored where the hero has the domain.

Domain curves come from the rungs' eval.jsonl (eval_loss/<domain>, trained here) or from an imported
long file (`ladder import-results SPEC domain_curves.csv`: rung or name, step, domain, loss), kept at
<root>/<ladder>/imported_domain_curves.csv. A fit per domain and per backtest is seconds, so the
result is cached beside it under domains/<digest of its inputs and of the code that computes it>.json.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.outputs import layout

IMPORTED_DOMAINS = "imported_domain_curves.csv"
DOMAIN_PREFIX = "eval_loss/"
FRACS = np.round(np.linspace(0.05, 1.0, 20), 2)
# A domain's extrapolation sigma is the larger of its own calibration backtests' and every domain's (pooled):
# one domain's few rung pairs are a thin sample. Chosen on the rungs before scoring: on Marin's Paloma domains,
# with the band of the d1536 backtest (from d768 + d1024) as the choice, the domain's own calibration, the
# pooled one and the larger of the two were compared (mean |coverage - level| over domains); the larger was
# closest, and it is then scored on the largest rung's backtest (`python -m bench follow` prints both).
BAND_RULE = "max(the domain's own calibration, every domain's) per fraction"


class DomainImportError(ValueError):
    """A bad domain-curves file: one line naming the file, the row or column, and the fix."""


def import_domain_curves(path: str, names: set[str], ladder_dir: Path) -> pd.DataFrame:
    """Check a long file of per-domain rung curves and keep it at <ladder>/imported_domain_curves.csv."""
    try:
        frame = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DomainImportError(f"{path}: cannot read a CSV ({type(exc).__name__})") from None
    if "name" not in frame.columns and "rung" in frame.columns:
        frame = frame.rename(columns={"rung": "name"})
    for col in ("name", "step", "domain", "loss"):
        if col not in frame.columns:
            raise DomainImportError(f"{path}: missing column '{col}'; give name (or rung), step, domain, loss")
    unknown = sorted(set(frame["name"].astype(str)) - names)
    if unknown:
        raise DomainImportError(f"{path}: {unknown[0]!r} is not a run of this ladder ({', '.join(sorted(names))})")
    for col in ("step", "loss"):
        bad = ~np.isfinite(pd.to_numeric(frame[col], errors="coerce"))
        if bad.any():
            raise DomainImportError(f"{path}: row {int(np.argmax(bad.to_numpy())) + 1}: {col} is not a number")
    out = frame[["name", "step", "domain", "loss"]].astype({"step": int, "loss": float, "domain": str})
    layout.write_csv_atomic(ladder_dir / IMPORTED_DOMAINS, out)
    return out


def domain_curves(ladder_dir: Path, dep_dirs: dict[str, str], runs: list[str]) -> pd.DataFrame:
    """name, step, domain, loss of every rung: imported ones from the long file, trained ones from eval.jsonl."""
    frames = []
    path = ladder_dir / IMPORTED_DOMAINS
    if path.exists():
        frames.append(pd.read_csv(path))
    for name in runs:
        d = dep_dirs.get(name)
        ev = layout.read_jsonl(Path(d) / layout.EVAL) if d else pd.DataFrame()
        cols = [c for c in ev.columns if c.startswith(DOMAIN_PREFIX)]
        for c in cols:
            frames.append(pd.DataFrame({"name": name, "step": ev["step"].astype(int), "domain": c[len(DOMAIN_PREFIX):],
                                        "loss": ev[c].astype(float)}))
    if not frames:
        return pd.DataFrame(columns=["name", "step", "domain", "loss"])
    out = pd.concat(frames, ignore_index=True).dropna()
    return out.drop_duplicates(["name", "step", "domain"], keep="last")


def trained_points(dep_dirs: dict[str, str], runs: list[str]) -> pd.DataFrame:
    """The trained rungs' eval points on our compute axis (run, step, frac, frac_snap, flops, total_flops, loss)."""
    rows = []
    for name in runs:
        d = dep_dirs.get(name)
        result = layout.read_json(Path(d) / layout.RESULT, None) if d else None
        ev = layout.read_jsonl(Path(d) / layout.EVAL) if d else pd.DataFrame()
        if not result or result.get("curve") or ev.empty or not result.get("total_steps") or "flops" not in ev:
            continue
        total = int(result["total_steps"])
        per_step = float(result["flops"]) / max(int(result["steps"]), 1)
        frac = ev["step"].to_numpy(float) / total
        rows.append(pd.DataFrame({"run": name, "step": ev["step"].astype(int), "frac": frac,
                                  "frac_snap": np.round(np.round(frac * 20) / 20, 2), "flops_ours": ev["flops"].astype(float),
                                  "total_ours": per_step * total, "loss": ev["eval_loss"].astype(float)})[frac > 0])
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def forecasts(fit_dir: str, curves: pd.DataFrame, cache_dir: Path, hero_domains: dict[str, float] | None = None,
              level: float = 0.9, trained: tuple[dict, list[str], float] | None = None) -> list[dict]:
    """One row per domain: the hero's final with its band, and the backtest of the largest rung from the others.

    The law is the one the fit chose on the imported curves; for rungs trained here (`trained`: their
    dep_dirs, names and the hero's FLOPs) the curve law is chosen here by the same backtests on the
    macro eval curves, then refitted per domain."""
    from fits.matched_progress_choice import sizes
    from ladder.analysis.curve_laws import POINTS_CSV

    doc = (layout.read_json(Path(fit_dir) / layout.FIT, {}) or {}).get("progress") or {}
    points_path = Path(fit_dir) / POINTS_CSV
    if curves.empty:
        return []
    if doc.get("chosen") and points_path.exists():
        points = pd.read_csv(points_path)
    elif trained is not None:
        points = trained_points(trained[0], trained[1])
        if points.empty or len(sizes(points, "total_ours")) < 3:
            return []
        doc = {"hero_totals": {"ours": float(trained[2])}, "complete": {r: True for r in points["run"].unique()}}
    else:
        return []
    inputs = json.dumps([doc.get("chosen"), doc.get("hero_totals"), level, BAND_RULE, _code_digest()], sort_keys=True)
    key = hashlib.sha256(points.to_csv(index=False).encode() + curves.to_csv(index=False).encode()
                         + inputs.encode()).hexdigest()[:16]
    cached = layout.read_json(cache_dir / f"{key}.json", None)
    rows = cached if cached is not None else _compute(points, curves, doc, level)
    if cached is None:
        layout.write_json_atomic(cache_dir / f"{key}.json", rows)
    for r in rows:  # the hero's own domain losses, where it has them, scored against the band
        actual = (hero_domains or {}).get(r["domain"])
        if actual is not None:
            r.update({"actual_final": actual, "relative_error": r["predicted_final"] / actual - 1,
                      "inside": r["lower"] <= actual <= r["upper"]})
    return rows


def _code_digest() -> str:
    """The source of the code that computes a domain's rows, in its cache key: rows an earlier rule computed
    (a report refreshed after an upgrade) are not served for this one's."""
    import fits.matched_progress
    import fits.matched_progress_choice
    import fits.matched_progress_forecast
    from ladder.analysis import curve_laws

    digest = hashlib.sha256(Path(__file__).read_bytes())
    for module in (fits.matched_progress, fits.matched_progress_choice, fits.matched_progress_forecast, curve_laws):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _compute(points: pd.DataFrame, curves: pd.DataFrame, doc: dict, level: float) -> list[dict]:
    from fits.matched_progress_choice import CANDIDATES, backtest, band, below, calibration_backtests, sizes
    from fits.matched_progress_forecast import forecast
    from ladder.analysis.curve_laws import axes

    if not doc.get("chosen"):
        from fits.matched_progress_choice import choose

        _, best = choose(axes(points, doc["hero_totals"]))
        if best is None:
            return []
        doc = {**doc, "chosen": {"candidate": best["candidate"], "axis": best["axis"]}}
    fit_fn = CANDIDATES[doc["chosen"]["candidate"]]
    fitted = {}  # domain -> (axis, its calibration backtests, the largest rung's backtest)
    for domain, grp in curves.groupby("domain", sort=True):
        g = grp.rename(columns={"name": "run", "loss": "domain_loss"})[["run", "step", "domain_loss"]]
        pts = points.merge(g, on=["run", "step"], how="inner")
        pts = pts.assign(loss=pts["domain_loss"]).drop(columns="domain_loss")
        axis = next((a for a in axes(pts, doc["hero_totals"]) if a.name == doc["chosen"]["axis"]), None)
        groups = sizes(axis.points) if axis is not None else []
        if len(groups) < 3:
            continue
        try:
            cal = calibration_backtests(axis.points, fit_fn)
            # the largest size's last run, from the smaller sizes (not its replicas)
            fitted[str(domain)] = (axis, cal, backtest(axis.points, fit_fn, below(groups, len(groups) - 1),
                                                       groups[-1][-1]))
        except (ValueError, np.linalg.LinAlgError):
            continue
    pooled = [b for _, cal, _ in fitted.values() for b in cal]
    out = []
    for domain, (axis, cal, bt) in fitted.items():
        try:
            curve, _ = forecast(axis, fit_fn, cal, FRACS, level, doc.get("complete") or {})
        except (ValueError, np.linalg.LinAlgError):
            continue
        decades = float(np.log10(axis.target_flops / float(axis.points["total_flops"].max())))
        own = curve["sigma_extrapolation"].to_numpy(float)
        wider = np.maximum(own, _sigma_ext(pooled, decades, FRACS))
        sigma = np.sqrt(np.maximum(curve["sigma"].to_numpy(float) ** 2 - own ** 2, 0.0) + wider ** 2)
        lower, upper = band(curve["loss"].to_numpy(float), sigma, level)
        cov = _blind_coverage(bt, cal, pooled, level)
        out.append({"domain": domain, "predicted_final": float(curve["loss"].iloc[-1]), "lower": float(lower[-1]),
                    "upper": float(upper[-1]), "points": int(len(axis.points)),
                    "law": f"{doc['chosen']['candidate']} on {doc['chosen']['axis']} compute", "band_rule": BAND_RULE,
                    "backtest": {"fit_on": bt["fit_on"], "predict": bt["predict"], "compute_ratio": bt["compute_ratio"],
                                 "mean_abs_rel_error": bt["mean_abs_rel_error"], "mean_rel_error": bt["mean_rel_error"],
                                 **cov}})
    return out


def _sigma_ext(backtests: list[dict], decades: float, fracs: np.ndarray) -> np.ndarray:
    from fits.matched_progress_choice import sigma_extrapolation

    return sigma_extrapolation(backtests, decades, fracs)


def _blind_coverage(bt: dict, own: list[dict], pooled: list[dict], level: float) -> dict:
    """The backtest's band by BAND_RULE from the calibration backtests blind to its target (the domain's own,
    and every domain's), and how many of its target's points it holds."""
    from fits.matched_progress_choice import band

    def blind(cal: list[dict]) -> list[dict]:
        return [b for b in cal if bt["predict"] not in set(b["fit_on"]) | {b["predict"]}]

    inner = blind(own)
    if not inner:
        return {"band_coverage": None, "band_points": None, "calibrated_on": []}
    fr = np.asarray(bt["frac"])
    sig = np.maximum(_sigma_ext(inner, bt["decades"], fr), _sigma_ext(blind(pooled), bt["decades"], fr))
    lo, hi = band(np.asarray(bt["predicted"]), sig, level)
    actual = np.asarray(bt["actual"])
    return {"band_coverage": float(((actual >= lo) & (actual <= hi)).mean()), "band_points": int(actual.size),
            "calibrated_on": sorted({b["predict"] for b in inner})}


def add_domains(report: dict, prediction: dict, dep_dirs: dict[str, str], config: dict) -> None:
    """report["domains"]: each domain's forecast and backtest (nothing when the rungs recorded no domains)."""
    fit_dir, predict_dir = dep_dirs.get("fit"), dep_dirs.get("predict")
    if not fit_dir or not predict_dir:
        return
    ladder_dir = Path(predict_dir).parent
    runs = list(config.get("rungs") or [])
    curves = domain_curves(ladder_dir, dep_dirs, runs)
    if curves.empty:
        return
    hero = (prediction or {}).get("hero") or {}
    hero_dir = dep_dirs.get(config.get("hero") or "")
    result = layout.read_json(Path(hero_dir) / layout.RESULT, {}) if hero_dir else {}
    trained = (dep_dirs, runs, float(hero["flops"])) if hero.get("flops") else None
    rows = forecasts(fit_dir, curves, ladder_dir / "domains", (result or {}).get("final_eval_loss_by_domain"),
                     float(hero.get("level") or config.get("level") or 0.9), trained)
    if rows:
        report["domains"] = rows
