"""The ladder's analysis steps: fit the laws on the rungs, predict the hero, gate it.

fit      reads every rung's result (final eval loss, and the WSD cooldown branches that give each
         rung several token budgets) and curves, fits the final-loss law with a bootstrap over
         runs, backtests it at the hero's own extrapolation ratio, and fits the curve shape.
predict  writes, before the hero starts, its predicted final loss with an interval calibrated
         for extrapolation, and its whole predicted curve (step, tokens, loss, lower, upper).
gate     blocks the hero when the ladder is not trustworthy, and says why.

Every number records where it came from: which runs, which law, which interval.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from ladder import layout
from ladder.spec import FitSpec, RungSpec, rung_from_dict

# ------------------------------------------------------------------------------------------
# Reading the rungs.


def collect_runs(rung_names: list[str], dep_dirs: dict[str, str]) -> tuple[pd.DataFrame, list[dict]]:
    """One row per fitted point: each rung's final result and each of its cooldown branches.

    Returns (runs, excluded): excluded lists rungs that did not finish, with their status.
    """
    rows, excluded = [], []
    for name in rung_names:
        d = dep_dirs.get(name)
        status = (layout.read_json(Path(d) / layout.STATUS, {}) or {}).get("status") if d else None
        result = layout.read_json(Path(d) / layout.RESULT, None) if d else None
        if not result or result.get("status") != "SUCCESS" or status not in (None, "SUCCESS"):
            excluded.append({"name": name, "status": (result or {}).get("status") or status or "MISSING",
                             "message": (result or {}).get("message")})
            continue
        # Runs of one size (replicas on other seeds) share a size key; the backtest and the bootstrap
        # treat a size as one unit, and the fit sees every run.
        base = {"name": name, "size": f"{float(result['params_active']):.0f}x{float(result['tokens']):.0f}",
                "params": float(result["params_active"]), "params_total": float(result["params_total"]),
                "flops_per_token": float(result["flops"]) / float(result["tokens"])}
        rows.append({**base, "kind": "final", "tokens": float(result["tokens"]), "flops": float(result["flops"]),
                     "loss": float(result["final_eval_loss"]), "train_loss": result.get("final_train_loss"),
                     "steps": result.get("steps")})
        for br in result.get("branches") or []:
            if br.get("final_eval_loss") is None:
                continue
            rows.append({**base, "kind": "branch", "tokens": float(br["tokens"]),
                         "flops": float(br["tokens"]) * base["flops_per_token"], "loss": float(br["final_eval_loss"]),
                         "train_loss": br.get("final_train_loss"), "steps": br.get("steps")})
    return pd.DataFrame(rows), excluded


def rung_curve(run_dir: str | Path) -> pd.DataFrame:
    """A rung's train-loss curve (step, tokens, lr, loss), one row per logged step.

    loss is the mean over each logged interval where the trainer recorded it (one step's loss on a
    tiny batch is ~10% noise), else the logged step's own loss.
    """
    m = layout.read_jsonl(Path(run_dir) / layout.METRICS)
    if m.empty:
        return m
    return interval_loss(m)[["step", "tokens", "lr", "loss"]].dropna().sort_values("step").drop_duplicates("step", keep="last")


def interval_loss(metrics: pd.DataFrame) -> pd.DataFrame:
    """Metrics rows with ``loss`` replaced by the logged interval's mean where the trainer wrote one."""
    if "loss_mean" not in metrics:
        return metrics
    return metrics.assign(loss=metrics["loss_mean"].fillna(metrics["loss"]))


# ------------------------------------------------------------------------------------------
# The final-loss laws.


def tied_chinchilla(N, D, L, n_polish: int = 4, starts: np.ndarray | None = None):
    """Chinchilla L(N, D) = E + A/N^a + B/D^a with one exponent for N and D.

    With a handful of model sizes the N-direction alone cannot pin E, A and alpha; tying the
    exponents (Chinchilla's own fits give alpha 0.34-0.35 and beta 0.28-0.37) lets the token
    budgets of each rung's cooldown branches carry the exponent. Same objective and procedure as
    fits.chinchilla (summed Huber on log loss, batched multi-start L-BFGS).
    """
    from fits.chinchilla import init_grid, objective
    from fits.lbfgs import multistart
    from fits.result import FitResult

    logN, logD, logL = np.log(N), np.log(D), np.log(L)

    def fun(X, rows):
        full = np.column_stack([X[:, 0], X[:, 1], X[:, 2], X[:, 3], X[:, 3]])
        f, g = objective(full, logN, logD, logL)
        return f, np.column_stack([g[:, 0], g[:, 1], g[:, 2], g[:, 3] + g[:, 4]])

    if starts is None:
        grid = init_grid()
        starts = np.unique(grid[grid[:, 3] == grid[:, 4]][:, :4], axis=0)
    best, best_f, ok, _ = multistart(fun, starts, n_polish=min(n_polish, len(starts)))
    a, b, e, alpha = best
    params = {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": float(alpha), "beta": float(alpha)}
    return FitResult(law="chinchilla", params=params, objective=float(best_f), n_points=len(L), n_starts=len(starts),
                     converged=bool(ok), config={"tied_exponents": True})


def fit_final_law(points: pd.DataFrame, fit: FitSpec, starts: np.ndarray | None = None, n_polish: int = 4):
    """The final-loss law on these points (FitResult); `starts` seeds the multi-start (bootstrap refits)."""
    import fits

    if fit.law == "compute":
        finals = points[points["kind"] == "final"]
        return fits.fit(finals[["params", "tokens", "flops", "loss"]], "compute", pin_E=fit.pin_E)
    if fit.law == "chinchilla_tied":
        return tied_chinchilla(points["params"].to_numpy(), points["tokens"].to_numpy(), points["loss"].to_numpy(),
                               starts=starts, n_polish=n_polish)
    return fits.fit(points[["params", "tokens", "flops", "loss"]], "chinchilla", starts=starts)


def _bootstrap_starts(base, fit: FitSpec) -> np.ndarray | None:
    """Starts for a bootstrap refit: the full fit's optimum and a few neighbours, not the whole grid."""
    if fit.law == "compute":
        return None
    p = base.params
    theta = np.array([math.log(max(p["A"], 1e-30)), math.log(max(p["B"], 1e-30)), math.log(max(p["E"], 1e-30)), p["alpha"]]
                     + ([] if fit.law == "chinchilla_tied" else [p["beta"]]))
    rng = np.random.default_rng(0)
    jitter = rng.normal(0.0, 1.0, (3, theta.size)) * np.array([2.0, 2.0, 0.5] + [0.1] * (theta.size - 3))
    return np.vstack([theta, theta + jitter])


def law_predict(result, params: float, tokens: float, flops: float) -> float:
    if result.law == "chinchilla":
        return float(result.model().predict(np.array([params]), np.array([tokens]))[0])
    return float(result.model().predict(np.array([flops]))[0])


def bootstrap_fits(points: pd.DataFrame, fit: FitSpec, base, n: int, seed: int = 0) -> list[dict[str, float]]:
    """Law parameters refitted on rungs resampled with replacement (n resamples).

    Resampling is over sizes (a rung, its branches and its replicas travel together), not over
    points, because a rung's branches share its model and its noise. Resamples with too few
    distinct sizes for the law are skipped.
    """
    by_size = {size: group for size, group in points.groupby("size", sort=False)}
    sizes = list(by_size)
    rng = np.random.default_rng(seed)
    starts = _bootstrap_starts(base, fit)
    out = []
    for _ in range(n):
        pick = rng.choice(sizes, size=len(sizes), replace=True)
        if len(set(pick)) < min_rungs(fit):
            continue
        sample = pd.concat([by_size[p] for p in pick], ignore_index=True)
        try:
            res = fit_final_law(sample, fit, starts=starts, n_polish=1)
        except ValueError:
            continue
        out.append(res.params)
    return out


def predict_samples(base, samples: list[dict[str, float]], targets: list[tuple[float, float, float]]) -> np.ndarray:
    """(len(samples), len(targets)) predictions of the law at each bootstrap sample's parameters."""
    out = []
    for params in samples:
        res = base.with_(params=params)
        out.append([law_predict(res, *t) for t in targets])
    return np.array(out)


def n_sizes(points: pd.DataFrame) -> int:
    return int(points.loc[points["kind"] == "final", "size"].nunique())


def seed_spread(points: pd.DataFrame) -> dict[str, Any] | None:
    """How far a size's runs on different seeds differ: (max - min) / mean of their final losses.

    This is the ladder's noise floor: a backtest error or hero miss within it is noise, not a
    wrong law. None when no size has more than one run.
    """
    finals = points[points["kind"] == "final"]
    groups = finals.groupby("size")["loss"]
    spread = (groups.max() - groups.min()) / groups.mean()
    spread = spread[groups.count() > 1]
    if spread.empty:
        return None
    return {"sizes": int(len(spread)), "median": float(spread.median()), "max": float(spread.max())}


def min_rungs(fit: FitSpec) -> int:
    return {"compute": 3, "chinchilla": 3, "chinchilla_tied": 2}[fit.law]


def backtest_at_ratio(points: pd.DataFrame, fit: FitSpec, ratio: float) -> dict[str, Any]:
    """Fit on the rungs at least `ratio` below the largest in compute, predict the largest.

    When too few rungs sit that far below, the smallest feasible gap is used and the record says
    how far it actually extrapolated, so the gate can refuse a backtest shorter than the hero's.
    """
    finals = points[points["kind"] == "final"]
    by_size = finals.groupby("size", sort=False).agg(flops=("flops", "mean"), params=("params", "mean"),
                                                     tokens=("tokens", "mean"), loss=("loss", "mean"),
                                                     runs=("name", list)).sort_values("flops")
    target = by_size.iloc[-1]
    below = by_size.iloc[:-1]
    chosen = below[below["flops"] <= target["flops"] / ratio * 1.05]
    if len(chosen) < min_rungs(fit):
        chosen = below.iloc[:max(min_rungs(fit), 1)]
    if len(chosen) < min_rungs(fit):
        return {"ok": False, "reason": f"{len(by_size)} finished rung sizes are too few to backtest the {fit.law} law"}
    fit_on = [n for runs in chosen["runs"] for n in runs]
    train = points[points["name"].isin(fit_on)]
    res = fit_final_law(train, fit)
    predicted = law_predict(res, target["params"], target["tokens"], target["flops"])
    achieved = float(target["flops"] / chosen["flops"].max())
    # With replicas the actual is the mean over the largest size's seeds.
    return {"ok": True, "fit_on": fit_on, "predict": target["runs"][0], "predict_runs": list(target["runs"]),
            "predicted": predicted, "actual": float(target["loss"]),
            "actual_runs": [float(x) for x in finals[finals["size"] == target.name]["loss"]],
            "relative_error": predicted / float(target["loss"]) - 1.0,
            "compute_ratio": achieved, "required_ratio": ratio, "decades": math.log10(achieved),
            "law": fit.law, "params": res.params}


# ------------------------------------------------------------------------------------------
# Curve shape: the final-loss law along the run, times a schedule factor measured on the rungs.
#
# The law L(N, D) gives the loss of a run *annealed* at D tokens. A WSD run in its stable phase
# sits above that (the learning rate is still high) and drops onto it in the cooldown; how far
# above, as a function of the fraction of the run, is the schedule's signature and the same for
# every run of the recipe. So each rung's smoothed train loss divided by the law at its tokens so
# far gives a factor c(f); the hero's curve is the law at the hero's tokens times the rungs' mean
# c(f). The law carries how loss falls with N and D; the factor carries the schedule.


def smooth(x: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average with edge padding (per-batch train loss is noisy on tiny batches)."""
    if window <= 1 or len(x) == 0:
        return x
    kernel = np.ones(window) / window
    padded = np.concatenate([np.full(window // 2, x[0]), x, np.full(window - 1 - window // 2, x[-1])])
    return np.convolve(padded, kernel, mode="valid")


def _law_at(result, n: float, tokens: np.ndarray, flops_per_token: float) -> np.ndarray:
    if result.law == "chinchilla":
        return result.model().predict(np.full_like(tokens, n, dtype=float), tokens)
    return result.model().predict(tokens * flops_per_token)


def schedule_factors(points: pd.DataFrame, dep_dirs: dict[str, str], result, grid: np.ndarray,
                     names: list[str] | None = None) -> pd.DataFrame:
    """Per rung, smoothed train loss / law(N, tokens so far) at run fractions `grid`."""
    rows = []
    for _, run in points[points["kind"] == "final"].iterrows():
        if names is not None and run["name"] not in names:
            continue
        curve = rung_curve(dep_dirs[run["name"]])
        if len(curve) < 8:
            continue
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


def law_curve(result, factors: pd.DataFrame, n: float, steps: np.ndarray, total_steps: int, batch_tokens: int,
              flops_per_token: float) -> tuple[np.ndarray, np.ndarray]:
    """(loss, sigma) of a run's train-loss curve at `steps` from the law and the schedule factor."""
    grid, factor, sigma = mean_factor(factors)
    frac = steps / total_steps
    law = _law_at(result, n, steps.astype(float) * batch_tokens, flops_per_token)
    return law * np.interp(frac, grid, factor), np.interp(frac, grid, sigma)


def curve_backtest(points: pd.DataFrame, dep_dirs: dict[str, str], fit: FitSpec, backtest: dict) -> dict[str, Any]:
    """The curve method on the backtest's split: predict the largest rung's curve without it."""
    if not backtest.get("ok"):
        return {"ok": False, "reason": "no backtest"}
    target = points[(points["kind"] == "final") & (points["name"] == backtest["predict"])].iloc[0]
    train = points[points["name"].isin(backtest["fit_on"])]
    res = fit_final_law(train, fit)
    others = [n for n in points["name"].unique() if n not in backtest.get("predict_runs", [target["name"]])]
    factors = schedule_factors(points, dep_dirs, res, np.linspace(0.005, 1.0, 200), names=others)
    curve = rung_curve(dep_dirs[target["name"]])
    if factors.empty or len(curve) < 8:
        return {"ok": False, "reason": "the rungs have no loss curves (imported results?)"}
    steps = curve["step"].to_numpy()
    total = int(steps.max())
    pred, _ = law_curve(res, factors, target["params"], steps, total, int(curve["tokens"].iloc[-1] / total),
                        target["flops_per_token"])
    actual = smooth(curve["loss"].to_numpy(float), max(1, len(curve) // 25))
    second = steps >= total / 2
    err = pred / actual - 1.0
    return {"ok": True, "predict": target["name"], "fit_on": backtest["fit_on"], "factors_from": others,
            "mean_abs_rel_error_second_half": float(np.mean(np.abs(err[second]))),
            "mean_rel_error_second_half": float(np.mean(err[second]))}


def _curves_by_n(points: pd.DataFrame, dep_dirs: dict[str, str], names=None) -> dict[float, list[pd.DataFrame]]:
    """Each rung's train-loss curve, lightly smoothed (per-batch noise on tiny batches is large)."""
    out: dict[float, list[pd.DataFrame]] = {}
    for _, run in points[points["kind"] == "final"].iterrows():
        if names is not None and run["name"] not in names:
            continue
        curve = rung_curve(dep_dirs[run["name"]])
        if len(curve) < 8:
            continue
        curve = curve.assign(loss=smooth(curve["loss"].to_numpy(float), max(1, len(curve) // 40)))
        curve = curve[curve["lr"] > 0]  # a schedule that anneals to exactly 0 has no log-lr at its last step
        out.setdefault(float(run["params"]), []).append(curve[["step", "lr", "loss"]])
    return out


def tail_loss(loss) -> float:
    """A run's final train loss: the mean over its last 5% of logged steps (one small batch is noisy)."""
    loss = np.asarray(loss, dtype=float)
    return float(np.mean(loss[-max(3, len(loss) // 20):]))


def _curve_final(model, n: float, curve: pd.DataFrame) -> float:
    return float(model.predict(n, curve["step"].to_numpy(), curve["lr"].to_numpy(),
                               at=np.array([int(curve["step"].max())]))[-1])


def eval_over_train(points: pd.DataFrame, dep_dirs: dict[str, str]) -> pd.Series:
    """Each rung's final eval loss over its final train loss, by name (the whole-curve law predicts train loss)."""
    finals = points[points["kind"] == "final"]
    return pd.Series({run["name"]: run["loss"] / tail_loss(rung_curve(dep_dirs[run["name"]])["loss"])
                      for _, run in finals.iterrows()})


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
    ratio = float(ratios[train_names].mean())
    actual_eval = float(targets["loss"].mean())
    doc["backtest"] = {"fit_on": train_names, "predict": target_names[0], "predict_runs": target_names,
                       "predicted_final_train": pred_train, "actual_final_train": actual_train,
                       "train_relative_error": pred_train / actual_train - 1.0, "eval_over_train": ratio,
                       "predicted": pred_train * ratio, "actual": actual_eval,
                       "relative_error": pred_train * ratio / actual_eval - 1.0}
    return doc


# ------------------------------------------------------------------------------------------
# The steps.


def _fit_spec(config: dict) -> FitSpec:
    return FitSpec(**{**config["fit"]})


def fit_ladder(config: dict, dep_dirs: dict[str, str], out_dir: str) -> dict:
    fit = _fit_spec(config)
    out = Path(out_dir)
    points, excluded = collect_runs(config["rungs"], dep_dirs)
    finals = points[points["kind"] == "final"] if not points.empty else points
    if points.empty or n_sizes(points) < min_rungs(fit):
        raise ValueError(f"only {len(finals)} rungs finished ({', '.join(e['name'] + ' ' + e['status'] for e in excluded)}); "
                         f"the {fit.law} law needs {min_rungs(fit)}")
    layout.write_csv_atomic(out / layout.RUNS_CSV, points)
    result = fit_final_law(points, fit)
    hero = rung_from_dict(config["hero"]) if config.get("hero") else None
    ratio = hero.flops / float(finals["flops"].max()) if hero else 10.0
    backtest = backtest_at_ratio(points, fit, ratio)

    # Bootstrap over rungs for parameters and for the law's band over compute.
    flops_grid = np.geomspace(finals["flops"].min() / 2, max(finals["flops"].max(), hero.flops if hero else 0) * 2, 60)
    grid_targets = _targets_along(points, flops_grid, hero)
    samples = bootstrap_fits(points, fit, result, fit.bootstrap, seed=0) if fit.bootstrap else []
    boot = predict_samples(result, samples, grid_targets) if samples else np.empty((0, 0))
    central = np.array([law_predict(result, *t) for t in grid_targets])
    law_curve = pd.DataFrame({"flops": flops_grid, "loss": central})
    level = fit.level
    if boot.size:
        law_curve["lower"] = np.percentile(boot, 50 * (1 - level), axis=0)
        law_curve["upper"] = np.percentile(boot, 50 * (1 + level), axis=0)
    else:
        law_curve["lower"] = law_curve["upper"] = central
    layout.write_csv_atomic(out / "law_curve.csv", law_curve)

    factors = schedule_factors(points, dep_dirs, result, np.linspace(0.005, 1.0, 200))
    if not factors.empty:
        layout.write_csv_atomic(out / layout.CURVES_CSV, factors)
    curve_bt = curve_backtest(points, dep_dirs, fit, backtest)
    curve_law = fit_curve_law(points, dep_dirs, fit.curve_law, backtest) if fit.curve_law != "none" else None

    summary = {"law": result.law if not result.config.get("tied_exponents") else "chinchilla_tied",
               "params": result.params, "n_points": result.n_points, "n_rungs": int(len(finals)),
               "objective": result.objective, "bootstrap": int(fit.bootstrap), "level": level,
               "fit_on": list(finals["name"]), "excluded": excluded, "seed_spread": seed_spread(points)}
    doc = {"summary": summary, "law": result.to_dict(), "backtest": backtest, "hero_ratio": ratio,
           "bootstrap_params": samples,
           "curve_method": "final-loss law at the tokens so far x the rungs' schedule factor c(run fraction)",
           "curve_backtest": curve_bt,
           "curve_law": curve_law}
    layout.write_json_atomic(out / layout.FIT, doc)
    return {"law": summary["law"], "params": result.params, "backtest_error": backtest.get("relative_error"),
            "backtest_ratio": backtest.get("compute_ratio")}


def _targets_along(points: pd.DataFrame, flops_grid: np.ndarray, hero: RungSpec | None) -> list[tuple[float, float, float]]:
    """(N, D, C) along the ladder's own allocation (tokens per parameter of the rungs), for plots."""
    finals = points[points["kind"] == "final"]
    tpp = float(np.median(finals["tokens"] / finals["params"]))
    fpt_per_n = float(np.median(finals["flops_per_token"] / finals["params"]))
    out = []
    for c in flops_grid:
        n = math.sqrt(c / (fpt_per_n * tpp))
        out.append((n, n * tpp, float(c)))
    return out


def prediction_interval(central: float, boot: np.ndarray, backtest: dict, decades: float, level: float) -> tuple[float, float, dict]:
    """An interval calibrated for extrapolation, in log loss.

    sigma^2 = sigma_boot^2 + (e_bt * decades / decades_bt)^2, where sigma_boot is the bootstrap's
    percentile width as a normal sigma and e_bt the log error of the backtest at its own distance.
    Resampling alone captures parameter noise, not the error of extrapolating (on Chinchilla a
    plain bootstrap band covered 18% of held-out runs), so the backtest's miss is carried along.
    """
    z = float(norm.ppf(0.5 + level / 2))
    sig_boot = 0.0
    if boot.size > 10:
        lo, hi = np.percentile(np.log(boot), [50 * (1 - level), 50 * (1 + level)])
        sig_boot = float((hi - lo) / (2 * z))
    sig_bt = 0.0
    if backtest.get("ok"):
        e = abs(math.log1p(backtest["relative_error"]))
        sig_bt = max(e, 0.005) * max(decades, 0.0) / max(backtest["decades"], 1e-3)
    sig = math.sqrt(sig_boot ** 2 + sig_bt ** 2)
    info = {"sigma_bootstrap": sig_boot, "sigma_extrapolation": sig_bt, "z": z,
            "method": "bootstrap over rungs (+) backtest log error scaled by extrapolation distance"}
    return central * math.exp(-z * sig), central * math.exp(z * sig), info


def hero_schedule(hero: RungSpec) -> pd.DataFrame:
    from ladder.train.optim import lr_schedule

    lrs = lr_schedule(hero)
    steps = np.unique(np.linspace(1, hero.steps, min(hero.steps, 400)).astype(int))
    return pd.DataFrame({"step": steps, "tokens": steps * hero.batch_tokens, "lr": lrs[steps - 1]})


def predict_ladder(config: dict, fit_dir: str, out_dir: str) -> dict:
    fit = _fit_spec(config)
    out = Path(out_dir)
    doc = layout.read_json(Path(fit_dir) / layout.FIT)
    points = pd.read_csv(Path(fit_dir) / layout.RUNS_CSV)
    from fits.result import FitResult

    result = FitResult.from_dict(doc["law"])
    finals = points[points["kind"] == "final"]
    largest = float(finals["flops"].max())
    prediction: dict[str, Any] = {"law": doc["summary"]["law"], "level": fit.level, "fit_on": doc["summary"]["fit_on"],
                                  "backtest": doc["backtest"], "targets": []}
    targets: list[tuple[str, float, float, float]] = []
    hero = rung_from_dict(config["hero"]) if config.get("hero") else None
    if hero:
        targets.append((hero.name, hero.model.params_active, hero.tokens, hero.flops))
    for t in config.get("targets") or []:
        from ladder.spec import ModelSpec, TargetSpec

        spec = TargetSpec(name=t["name"], model=ModelSpec(**t["model"]), tokens=t["tokens"], seq_len=t["seq_len"])
        targets.append((spec.name, spec.model.params_active, spec.tokens, spec.flops))
    samples = doc.get("bootstrap_params") or []
    boot = predict_samples(result, samples, [t[1:] for t in targets]) if samples else np.empty((0, 0))
    rows = []
    for i, (name, n, d, c) in enumerate(targets):
        central = law_predict(result, n, d, c)
        decades = math.log10(c / largest)
        lower, upper, info = prediction_interval(central, boot[:, i] if boot.size else boot, doc["backtest"], decades, fit.level)
        rows.append({"name": name, "params": n, "tokens": d, "flops": c, "loss": central, "lower": lower, "upper": upper,
                     "compute_ratio": c / largest, **info})
    if rows:
        layout.write_csv_atomic(out / layout.TARGETS_CSV, pd.DataFrame(rows))
    if hero:
        h = rows[0]
        prediction["hero"] = {"name": hero.name, "predicted_final_loss": h["loss"], "lower": h["lower"], "upper": h["upper"],
                              "level": fit.level, "law": prediction["law"], "params": h["params"], "tokens": h["tokens"],
                              "flops": h["flops"], "compute_ratio": h["compute_ratio"],
                              "interval": {k: h[k] for k in ("sigma_bootstrap", "sigma_extrapolation", "method")}}
        curve = _hero_curve(hero, h, fit_dir, doc)
        second = _hero_curve_law(hero, doc)
        if curve is not None:
            layout.write_csv_atomic(out / layout.HERO_CURVE, curve)
        if second is not None and np.all(np.isfinite(second["loss"])):
            layout.write_csv_atomic(out / "hero_curve_law.csv", second)
            prediction["hero"]["curve_law_final_train_loss"] = float(second["loss"].iloc[-1])
            prediction["hero"]["curve_law_final_eval_loss"] = float(second["loss"].iloc[-1]) * doc["curve_law"]["eval_over_train"]
    prediction["targets"] = rows[1:]
    layout.write_json_atomic(out / layout.PREDICTION, prediction)
    return {"hero": prediction.get("hero"), "targets": [r["name"] for r in rows[1:]]}


def _hero_curve(hero: RungSpec, h: dict, fit_dir: str, doc: dict) -> pd.DataFrame | None:
    """The hero's predicted train-loss curve and band (see schedule_factors)."""
    from fits.result import FitResult

    path = Path(fit_dir) / layout.CURVES_CSV
    if not path.exists():
        return None
    factors = pd.read_csv(path)
    result = FitResult.from_dict(doc["law"])
    sched = hero_schedule(hero)
    steps = sched["step"].to_numpy()
    fpt = hero.flops / hero.tokens
    loss, sigma = law_curve(result, factors, hero.model.params_active, steps, hero.steps, hero.batch_tokens, fpt)
    # Anchor on the interval's centre (the law's prediction for the final eval loss) so the curve and
    # the final prediction agree; the band is the final interval's width plus the factor's spread.
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
    from ladder.train.optim import lr_schedule

    law = (doc.get("curve_law") or {}).get("fit")
    if not law:
        return None
    model = FitResult.from_dict(law).model()
    lrs = lr_schedule(hero)
    all_steps = np.arange(1, hero.steps + 1)
    at = np.unique(np.linspace(1, hero.steps, min(hero.steps, 400)).astype(int))
    loss = model.predict(hero.model.params_active, all_steps, lrs, at=at)
    return pd.DataFrame({"step": at, "tokens": at * hero.batch_tokens, "lr": lrs[at - 1], "loss": loss})


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
    else:
        bt = fit_doc.get("backtest") or {}
        if not bt.get("ok"):
            reasons.append(f"no backtest: {bt.get('reason')}")
        else:
            if abs(bt["relative_error"]) > gate["max_backtest_error"]:
                reasons.append(f"backtest error {bt['relative_error']:+.2%} (fit on {', '.join(bt['fit_on'])}, predict {bt['predict']} "
                               f"at {bt['compute_ratio']:.1f}x) exceeds {gate['max_backtest_error']:.1%}")
            hero_ratio = fit_doc.get("hero_ratio") or 0
            if bt["compute_ratio"] < hero_ratio / 1.5:
                reasons.append(f"the backtest extrapolates {bt['compute_ratio']:.1f}x but the hero is {hero_ratio:.1f}x beyond the "
                               "largest rung: add rungs so a backtest reaches the hero's ratio")
    if pred and pred.get("hero"):
        h = pred["hero"]
        width = (h["upper"] - h["lower"]) / h["predicted_final_loss"]
        if width > gate["max_interval_width"]:
            reasons.append(f"the hero's {h['level']:.0%} interval is {width:.1%} of the prediction, wider than {gate['max_interval_width']:.1%}")
    elif fit_doc:
        reasons.append("no hero prediction")
    passed = not reasons
    verdict = {"passed": passed, "overridden": bool(force and not passed), "reasons": reasons, "thresholds": gate}
    layout.write_json_atomic(Path(out_dir) / layout.GATE, verdict)
    if not passed and not force:
        raise Blocked(reasons)
    return verdict
