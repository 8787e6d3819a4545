"""Curve laws on rungs trained here: the final-loss law along the run times a schedule factor, and
the whole-curve law (fits.joint) as a second estimate.

The law L(N, D) gives the loss of a run *annealed* at D tokens. A WSD run in its stable phase
sits above that (the learning rate is still high) and drops onto it in the cooldown; how far
above, as a function of the fraction of the run, is the schedule's signature and the same for
every run of the recipe. So each rung's smoothed train loss divided by the law at its tokens so
far gives a factor c(f); the hero's curve is the law at the hero's tokens times the rungs' mean
c(f). The law carries how loss falls with N and D; the factor carries the schedule.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from fits.laws.registry import in_compute
from ladder.analysis.runs import rung_curve, smooth, tail_loss
from ladder.outputs import layout
from ladder.spec import RungSpec


def _law_at(result, n: float, tokens: np.ndarray, flops_per_token: float) -> np.ndarray:
    if in_compute(result.law):
        return result.model().predict(tokens * flops_per_token)
    return result.model().predict(np.full_like(tokens, n, dtype=float), tokens)


def _final_rung_curves(points: pd.DataFrame, dep_dirs: dict[str, str], names=None):
    """(run row, train-loss curve) of each finished rung (of ``names``) long enough to fit a curve to."""
    for _, run in points[points["kind"] == "final"].iterrows():
        if names is not None and run["name"] not in names:
            continue
        curve = rung_curve(dep_dirs[run["name"]])
        if len(curve) >= 8:
            yield run, curve


def schedule_factors(points: pd.DataFrame, dep_dirs: dict[str, str], result, grid: np.ndarray,
                     names: list[str] | None = None) -> pd.DataFrame:
    """Per rung, smoothed train loss / law(N, tokens so far) at run fractions `grid`."""
    rows = []
    for run, curve in _final_rung_curves(points, dep_dirs, names):
        frac = curve["step"].to_numpy(float) / float(curve["step"].max())
        loss = smooth(curve["loss"].to_numpy(float), max(1, len(curve) // 25))
        law = _law_at(result, run["params"], curve["tokens"].to_numpy(float), run["flops_per_token"])
        factor = np.interp(grid, frac, loss / law)
        rows.append(pd.DataFrame({"name": run["name"], "flops": run["flops"], "frac": grid, "factor": factor}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def mean_factor(factors: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grid, factor, sigma): the rungs' geometric-mean factor per fraction and its spread in log."""
    grid = np.sort(factors["frac"].unique())
    logf = np.log(factors.pivot(index="frac", columns="name", values="factor").loc[grid].to_numpy(float))
    return grid, np.exp(logf.mean(axis=1)), logf.std(axis=1, ddof=1) if logf.shape[1] > 1 else np.zeros(len(grid))


def shape_sigma(factors: pd.DataFrame, frac: np.ndarray) -> np.ndarray:
    """The rungs' spread (log sd) of their factor relative to its own end, c(f) / c(1), at `frac`: the
    uncertainty of a curve's shape once its end is fixed (zero at the end)."""
    logf = np.log(factors.pivot(index="frac", columns="name", values="factor").sort_index())
    if logf.shape[1] < 2:
        return np.zeros(len(frac))
    rel = logf.to_numpy(float) - logf.to_numpy(float)[-1]
    return np.interp(frac, logf.index.to_numpy(float), rel.std(axis=1, ddof=1))


def law_curve(result, factors: pd.DataFrame, n: float, steps: np.ndarray, total_steps: int, batch_tokens: int,
              flops_per_token: float) -> tuple[np.ndarray, np.ndarray]:
    """(loss, sigma) of a run's train-loss curve at `steps` from the law and the schedule factor."""
    grid, factor, sigma = mean_factor(factors)
    frac = steps / total_steps
    law = _law_at(result, n, steps.astype(float) * batch_tokens, flops_per_token)
    return law * np.interp(frac, grid, factor), np.interp(frac, grid, sigma)


def _curves_by_n(points: pd.DataFrame, dep_dirs: dict[str, str], names=None) -> dict[float, list[pd.DataFrame]]:
    """Each rung's train-loss curve, lightly smoothed (per-batch noise on tiny batches is large)."""
    out: dict[float, list[pd.DataFrame]] = {}
    for run, curve in _final_rung_curves(points, dep_dirs, names):
        curve = curve.assign(loss=smooth(curve["loss"].to_numpy(float), max(1, len(curve) // 40)))
        curve = curve[curve["lr"] > 0]  # a schedule that anneals to exactly 0 has no log-lr at its last step
        out.setdefault(float(run["params"]), []).append(curve[["step", "lr", "loss"]])
    return out


def _curve_final(model, n: float, curve: pd.DataFrame) -> float:
    return float(model.predict(n, curve["step"].to_numpy(), curve["lr"].to_numpy(),
                               at=np.array([int(curve["step"].max())]))[-1])


def eval_over_train(points: pd.DataFrame, dep_dirs: dict[str, str]) -> pd.Series:
    """Each rung's final eval loss over its final train loss, by name (the whole-curve law predicts train loss)."""
    finals = points[points["kind"] == "final"]
    return pd.Series({run["name"]: run["loss"] / tail_loss(rung_curve(dep_dirs[run["name"]])["loss"])
                      for _, run in finals.iterrows()})


def eval_over_train_trend(points: pd.DataFrame, ratios: pd.Series, names: list[str] | None = None) -> dict[str, float]:
    """log(eval / train) as a line in log C over sizes (each size its runs' mean), to carry to a larger run.

    `ratios` is `eval_over_train` of these runs, by name. The whole-curve law forecasts train loss;
    the held-out split drifts from it as models grow, so the rungs' mean ratio would put a hero's eval
    forecast low (experiments/tiny_record.md). One size gives a flat line at its ratio.
    """
    finals = points[points["kind"] == "final"]
    if names is not None:
        finals = finals[finals["name"].isin(names)]
    logs = np.log(ratios)
    by_size = pd.DataFrame({"x": np.log(finals["flops"].to_numpy(float)), "y": logs[finals["name"]].to_numpy(),
                            "size": finals["size"].to_numpy()}).groupby("size").mean()
    centre = float(by_size["x"].mean())
    slope = float(np.polyfit(by_size["x"] - centre, by_size["y"], 1)[0]) if len(by_size) > 1 else 0.0
    return {"log_ratio_at_centre": float(by_size["y"].mean()), "slope_per_log_flops": slope, "log_flops_centre": centre,
            "sizes": int(len(by_size))}


def ratio_at(trend: dict[str, float], flops: float) -> float:
    """The eval/train ratio the trend gives at `flops`."""
    return float(np.exp(trend["log_ratio_at_centre"] + trend["slope_per_log_flops"] * (math.log(flops) - trend["log_flops_centre"])))


def fit_curve_law(points: pd.DataFrame, dep_dirs: dict[str, str], law: str, backtest: dict | None = None) -> dict[str, Any]:
    """The whole-curve law across sizes (fits.fit_joint_curves) and its backtest.

    The backtest fits the same rungs as the final-loss law's backtest (else every size but the
    largest) and predicts the largest size's final train loss from its schedule alone, and, scaled
    by the training rungs' eval/train ratio, its final eval loss. A failure to fit is recorded, not hidden.
    """
    import fits

    finals = points[points["kind"] == "final"].sort_values("flops")
    by_n = _curves_by_n(points, dep_dirs)
    doc: dict[str, Any] = {"law": f"joint_{law}"}
    if len(by_n) < 2:
        doc["error"] = f"a joint curve fit needs curves from 2 sizes, got {len(by_n)}"
        return doc
    try:
        res = fits.fit_joint_curves(by_n, law=law)
    except (ValueError, np.linalg.LinAlgError) as exc:
        doc["error"] = f"{type(exc).__name__}: {exc}"
        return doc
    doc["fit"] = res.to_dict()
    ratios = eval_over_train(points, dep_dirs)
    doc["eval_over_train"] = float(ratios.mean())
    doc["eval_over_train_trend"] = eval_over_train_trend(points, ratios)
    if backtest and backtest.get("ok"):
        train_names, target_names = list(backtest["fit_on"]), list(backtest["predict_runs"])
    else:
        largest = finals["size"].iloc[-1]
        train_names = list(finals["name"][finals["size"] != largest])
        target_names = list(finals["name"][finals["size"] == largest])
    sub = _curves_by_n(points, dep_dirs, names=train_names)
    if len(sub) < 2:
        doc["backtest"] = {"error": f"a joint curve fit needs curves from 2 sizes, got {len(sub)}"}
        return doc
    try:
        bt = fits.fit_joint_curves(sub, law=law).model()
    except (ValueError, np.linalg.LinAlgError) as exc:
        doc["backtest"] = {"error": f"{type(exc).__name__}: {exc}"}
        return doc
    targets = finals[finals["name"].isin(target_names)]
    curves = [rung_curve(dep_dirs[name]) for name in targets["name"]]
    pred_train = float(np.mean([_curve_final(bt, float(targets["params"].iloc[0]), c) for c in curves]))
    actual_train = float(np.mean([tail_loss(c["loss"]) for c in curves]))
    ratio = ratio_at(eval_over_train_trend(points, ratios, train_names), float(targets["flops"].mean()))
    actual_eval = float(targets["loss"].mean())
    doc["backtest"] = {"fit_on": train_names, "predict": target_names[0], "predict_runs": target_names,
                       "predicted_final_train": pred_train, "actual_final_train": actual_train,
                       "train_relative_error": pred_train / actual_train - 1.0, "eval_over_train": ratio,
                       "predicted": pred_train * ratio, "actual": actual_eval,
                       "relative_error": pred_train * ratio / actual_eval - 1.0,
                       "eval_over_train_mean": float(ratios[train_names].mean())}
    return doc


def hero_schedule(hero: RungSpec) -> pd.DataFrame:
    from ladder.trainers.builtin.optim import lr_schedule

    lrs = lr_schedule(hero)
    steps = np.unique(np.linspace(1, hero.steps, min(hero.steps, 400)).astype(int))
    return pd.DataFrame({"step": steps, "tokens": steps * hero.batch_tokens, "lr": lrs[steps - 1]})


def _hero_curve(hero: RungSpec, h: dict, fit_dir: str, doc: dict) -> pd.DataFrame | None:
    """The hero's predicted curve and band, ending on the final's prediction and interval (see schedule_factors)."""
    from fits.result import FitResult

    path = Path(fit_dir) / layout.CURVES_CSV
    if not path.exists():
        return None
    factors = pd.read_csv(path)
    result = FitResult.from_dict(doc["law"])
    sched = hero_schedule(hero)
    steps = sched["step"].to_numpy()
    fpt = hero.flops / hero.tokens
    loss, _ = law_curve(result, factors, hero.model.params_active, steps, hero.steps, hero.batch_tokens, fpt)
    # One forecast of the final: the law times the schedule factor is a train-loss curve (its end, c(1), is the
    # rungs' train over eval loss, a few percent under 1), so its shape is carried onto the final's scale by one
    # factor and the curve ends on the final's prediction, the centre the report heads with. The band is the
    # final interval's width (+) the rungs' spread of their shape relative to its own end, which is zero at
    # the end: there the band is the final's interval itself, not a second one.
    loss = loss * (h["loss"] / float(loss[-1]))
    sigma = shape_sigma(factors, steps / hero.steps)
    z = float(norm.ppf(0.5 + h.get("level", 0.9) / 2)) if h.get("level") else 1.645
    half_lo = math.log(h["loss"] / h["lower"]) if h["lower"] > 0 else 0.0
    half_hi = math.log(h["upper"] / h["loss"])
    lower = loss * np.exp(-np.sqrt(half_lo ** 2 + (z * sigma) ** 2))
    upper = loss * np.exp(np.sqrt(half_hi ** 2 + (z * sigma) ** 2))
    return pd.DataFrame({"step": steps, "tokens": sched["tokens"], "flops": sched["tokens"] * fpt,
                         "lr": sched["lr"], "loss": loss, "lower": lower, "upper": upper})


def _hero_curve_law(hero: RungSpec, doc: dict) -> pd.DataFrame | None:
    """The hero's curve from the whole-curve law alone (a second, independent estimate)."""
    from fits.result import FitResult
    from ladder.trainers.builtin.optim import lr_schedule

    law = (doc.get("curve_law") or {}).get("fit")
    if not law:
        return None
    model = FitResult.from_dict(law).model()
    lrs = lr_schedule(hero)
    all_steps = np.arange(1, hero.steps + 1)
    at = np.unique(np.linspace(1, hero.steps, min(hero.steps, 400)).astype(int))
    loss = model.predict(hero.model.params_active, all_steps, lrs, at=at)
    return pd.DataFrame({"step": at, "tokens": at * hero.batch_tokens, "lr": lrs[at - 1], "loss": loss})


def curve_law_final_eval(hero: RungSpec, doc: dict) -> tuple[pd.DataFrame, float, float] | None:
    """(the hero's curve from the whole-curve law, the eval/train ratio at the hero, its final eval loss), or None.

    The curve law fits train loss; the rungs' eval/train ratio (its trend over compute where the fit
    wrote one) turns its final into the quantity the final-loss law predicts."""
    curve = _hero_curve_law(hero, doc)
    if curve is None or not np.all(np.isfinite(curve["loss"])):
        return None
    curve_doc = doc["curve_law"]
    # A fit written before the trend existed carries only the rungs' mean ratio.
    ratio = (ratio_at(curve_doc["eval_over_train_trend"], hero.flops) if curve_doc.get("eval_over_train_trend")
             else curve_doc["eval_over_train"])
    final = float(curve["loss"].iloc[-1]) * float(ratio)
    return (curve, float(ratio), final) if math.isfinite(final) and final > 0 else None
