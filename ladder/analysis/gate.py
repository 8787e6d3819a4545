"""The gate step: block the hero when the ladder is not trustworthy, and say why."""

from __future__ import annotations

import math
from pathlib import Path

from ladder.outputs import layout


def gate_ladder(config: dict, dep_dirs: dict[str, str], out_dir: str, force: bool = False) -> dict:
    from ladder.executor import Blocked

    gate = config["gate"]
    reasons: list[str] = []
    for name in config["rungs"]:
        d = dep_dirs.get(name)
        result = layout.read_json(Path(d) / layout.RESULT, {}) if d else {}
        status = (layout.read_json(Path(d) / layout.STATUS, {}) or {}).get("status") if d else "MISSING"
        if (result or {}).get("failed_step") is not None:
            reasons.append(f"{name} diverged: loss non-finite at step {result['failed_step']} (lr {result.get('lr')})")
        elif status != "SUCCESS" and not gate.get("allow_diverged"):
            reasons.append(f"{name} did not finish ({status})")
    fit_doc = layout.read_json(Path(dep_dirs["fit"]) / layout.FIT) if dep_dirs.get("fit") else None
    pred = layout.read_json(Path(dep_dirs["predict"]) / layout.PREDICTION) if dep_dirs.get("predict") else None
    if not fit_doc:
        reasons.append("the fit did not complete")
    elif (fit_doc.get("progress") or {}).get("chosen"):
        reasons.extend(_progress_reasons(fit_doc["progress"], gate))
    else:
        reasons.extend(final_law_reasons(fit_doc.get("backtest") or {}, fit_doc.get("hero_ratio") or 0, gate))
    if pred and pred.get("hero"):
        reasons.extend(width_reasons(pred["hero"], gate))
    elif fit_doc:
        reasons.append("no hero prediction")
    blocking, warnings = _outlier_verdict(fit_doc, config, gate)
    reasons.extend(blocking)
    more, seeds = _seed_warnings(fit_doc, pred, gate, reasons)
    warnings.extend(more)
    backtest = (fit_doc or {}).get("backtest") or {}
    if backtest.get("ok") and backtest.get("underdetermined"):
        warnings.append(f"the backtest has no residual ({backtest['underdetermined']} below the hero's ratio): its error "
                        "is mostly those points' seed noise, carried out by the curvature")
    warnings.extend(_noise_warnings(backtest, gate))
    warnings.extend(_rule_warnings(backtest, gate))
    passed = not reasons
    # A hero trained elsewhere has nothing here to hold back: the verdict is recorded, not enforced.
    advisory = bool(config.get("advisory"))
    verdict = {"passed": passed, "overridden": bool(force and not passed), "advisory": advisory, "reasons": reasons,
               "warnings": warnings, "seeds": seeds, "thresholds": gate}
    layout.write_json_atomic(Path(out_dir) / layout.GATE, verdict)
    if not passed and not force and not advisory:
        raise Blocked(reasons)
    return verdict


def final_law_reasons(bt: dict, hero_ratio: float, gate: dict) -> list[str]:
    """The final-loss law's backtest against the gate: its miss, and how far it reaches against the hero's ratio."""
    if not bt.get("ok"):
        return [f"no backtest: {bt.get('reason')}"]
    return _backtest_reasons(bt, gate) + reach_reasons(bt, hero_ratio)


def reach_reasons(bt: dict, hero_ratio: float) -> list[str]:
    """A backtest that stops well short of the hero's distance says little about the hero."""
    if bt["compute_ratio"] >= hero_ratio / 1.5:
        return []
    return [f"the backtest extrapolates {bt['compute_ratio']:.1f}x but the hero is {hero_ratio:.1f}x beyond the "
            "largest rung: add rungs so a backtest reaches the hero's ratio"]


def width_reasons(hero: dict, gate: dict) -> list[str]:
    """The hero's interval against the gate's widest (upper - lower over the centre)."""
    width = (hero["upper"] - hero["lower"]) / hero["predicted_final_loss"]
    if width <= gate["max_interval_width"]:
        return []
    return [f"the hero's {hero['level']:.0%} interval is {width:.1%} of the prediction, "
            f"wider than {gate['max_interval_width']:.1%}"]


def outlier_blocks(outlier: dict | None, gate: dict) -> bool:
    """Whether a replica outlier (ladder.analysis.outliers.replica_outlier) is below the gate's family-wise level."""
    return bool(outlier) and float(outlier["p_family"]) < float(gate.get("replica_outlier_level", 0.0))


def _outlier_verdict(fit_doc: dict | None, config: dict, gate: dict) -> tuple[list[str], list[str]]:
    """(reasons, warnings) for a replica far beyond the other sizes' seed spread (ladder.analysis.outliers):
    it blocks below the gate's family-wise level and warns below the fit's describing level."""
    from ladder.analysis.outliers import outlier_reason

    outlier = ((fit_doc or {}).get("summary") or {}).get("replica_outlier")
    if not outlier or "odd_run" not in outlier:
        return [], []
    line = outlier_reason(outlier, list(config["rungs"]))
    if outlier_blocks(outlier, gate):
        return [line], []
    return [], [line]


def band_text(noise: dict) -> str:
    """The band as the relative misses it spans: symmetric in log loss, so a shortfall's edge is nearer than an excess's."""
    x = math.log1p(noise["band"])
    return f"{math.expm1(-x):+.2%} to {noise['band']:+.2%}"


def _band_is_the_bar(noise: dict | None, gate: dict) -> bool:
    """Whether the "noise" rule applies: the band's seed sigma was measured (on replicas, or as one-seed sizes' scatter
    about the law) and the gate asks for it."""
    from ladder.analysis.seeds import MEASURED_SOURCES

    return bool(noise) and noise["source"] in MEASURED_SOURCES and gate.get("backtest_rule", "threshold") == "noise"


def _backtest_reasons(bt: dict, gate: dict) -> list[str]:
    """The backtest against the threshold; under the "noise" rule a miss inside its measured seed-noise band passes.

    A right law's backtest misses by more than its band (at the fit's level) only that level's share
    of the time, whatever the threshold; a fixed 2% inside a 3% band would block a right law about
    half the time and say nothing about the law. The band is used only where replicas measured the
    seed spread: a prior is not a measurement, so without replicas the threshold alone decides.
    """
    if abs(bt["relative_error"]) <= gate["max_backtest_error"]:
        return []
    noise = bt.get("noise")
    where = (f"backtest error {bt['relative_error']:+.2%} (fit on {', '.join(bt['fit_on'])}, predict {bt['predict']} "
             f"at {bt['compute_ratio']:.1f}x) exceeds {gate['max_backtest_error']:.1%}")
    if not noise:
        return [where]
    if noise["within"] and _band_is_the_bar(noise, gate):
        return []
    return [f"{where}; seed noise alone moves it {band_text(noise)} at {noise['level']:.0%} "
            f"({'within' if noise['within'] else 'beyond'} that)"]


def _rule_warnings(backtest: dict, gate: dict) -> list[str]:
    """Say when the "noise" rule let a miss beyond the threshold pass: the user sees what the gate did."""
    noise = backtest.get("noise") if backtest.get("ok") else None
    if not _band_is_the_bar(noise, gate) or not noise["within"] or abs(backtest["relative_error"]) <= gate["max_backtest_error"]:
        return []
    return [f"backtest error {backtest['relative_error']:+.2%} exceeds {gate['max_backtest_error']:.1%} but is within its "
            f"seed-noise band ({band_text(noise)} at {noise['level']:.0%}, measured on {noise['source']}): no evidence against the "
            "law at this ratio, so the gate passes it (gate.backtest_rule='threshold' blocks it); the hero's interval "
            "carries the miss"]


# Above this chance of blocking a ladder whose law is right, the gate says its threshold is inside the noise.
FALSE_BLOCK_WARN = 0.10


def _noise_warnings(backtest: dict, gate: dict) -> list[str]:
    """Say when the backtest threshold sits inside the backtest's own seed noise: then a block says little."""
    from ladder.analysis.backtests import false_block

    noise = backtest.get("noise") if backtest.get("ok") else None
    # Under the "noise" rule with measured replicas the band is the bar, so the threshold's odds do not apply.
    if not noise or _band_is_the_bar(noise, gate):
        return []
    chance = false_block(noise, gate["max_backtest_error"])
    if chance <= FALSE_BLOCK_WARN:
        return []
    return [f"the gate's {gate['max_backtest_error']:.1%} is inside this backtest's seed noise ({band_text(noise)} at "
            f"{noise['level']:.0%}, {noise['sigma_run']:.2%} a run, {noise['source']}): it would block about {chance:.0%} of "
            "ladders whose law is right; more seeds (or sizes) below the cut narrow it"]


def _progress_reasons(progress: dict, gate: dict) -> list[str]:
    """The curve law's backtests against the gate: each one's mean error, and how far they reach against the hero."""
    reasons = []
    for bt in progress.get("backtests") or []:
        if abs(bt["mean_rel_error"]) > gate["max_backtest_error"]:
            reasons.append(f"curve backtest {', '.join(bt['fit_on'])} -> {bt['predict']} at {bt['compute_ratio']:.1f}x: mean error "
                           f"{bt['mean_rel_error']:+.2%} exceeds {gate['max_backtest_error']:.1%}")
    reach = max((bt["compute_ratio"] for bt in progress.get("backtests") or []), default=0.0)
    hero_ratio = 10 ** progress["forecast"]["decades"]
    if reach < hero_ratio / 1.5:
        reasons.append(f"the curve backtests reach {reach:.1f}x but the hero is {hero_ratio:.0f}x beyond the largest rung: "
                       "its band is scaled out from them, not measured there")
    return reasons


def _seed_warnings(fit_doc: dict | None, pred: dict | None, gate: dict, reasons: list[str]) -> tuple[list[str], dict | None]:
    """With one seed per size the spread between seeds is unknown: say so, and block when the gate requires replicas.

    A backtest that passes is one seed's draw: on the smoke ladder a second seed moved the two
    largest rungs' final losses by 6-7.5%, far beyond the backtest's error. The band carries a
    prior for it (ladder.analysis.seeds); the gate records whether the ladder's author accepted that
    (gate.accept_single_seed) and blocks instead when gate.require_replicas is set.
    """
    summary = (fit_doc or {}).get("summary") or {}
    seeds = summary.get("seed_noise") or ((pred or {}).get("hero") or {}).get("seeds")
    if not seeds:
        return [], None
    seeds = {**seeds, "acknowledged": bool(gate.get("accept_single_seed"))}
    if seeds.get("source") != "prior":
        return [], seeds
    text = (f"one seed per size: the spread between seeds is unknown; the band carries a prior of {seeds['sigma']:.2%} "
            "per run, not a measurement")
    if gate.get("require_replicas"):
        reasons.append(text + ": the gate requires replicas (train a rung again with replica=1)")
        return [], seeds
    suffix = " (accepted: gate.accept_single_seed)" if seeds["acknowledged"] else \
        " (not acknowledged: train replicas, or set gate.accept_single_seed to accept the prior)"
    return [text + suffix], seeds
