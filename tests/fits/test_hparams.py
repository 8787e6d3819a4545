"""fits.hparams: per-budget optima of a sweep and the power-law rule through them."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.hparams import budget_optimum, fit_rule
from fits.io import InputError

SWEEPS_CSV = Path(__file__).resolve().parents[2] / "experiments" / "tiny_sweeps.csv"


def _bowls(coef, exponent, budgets, mults, curvature=0.05, noise=0.0, seed=0):
    """Loss = floor(C) + curvature * log(lr / lr_opt(C))^2 at each swept multiple of a reference lr."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in budgets:
        lr_opt = coef * c**exponent
        reference = 1.3 * lr_opt  # the sweep is centred off the optimum, as a real one would be
        for m in mults:
            lr = reference * m
            loss = 5.0 * c**-0.1 + curvature * np.log(lr / lr_opt) ** 2 + rng.normal(0, noise)
            rows.append((c, lr, loss))
    return np.array(rows).T


def test_recovers_a_known_rule_from_quadratic_bowls():
    budget, lr, loss = _bowls(0.8, -0.2, [1e10, 1e11, 1e12, 1e13], [0.25, 0.5, 1, 2, 4])
    rule = fit_rule(budget, lr, loss)
    assert rule.exponent == pytest.approx(-0.2, abs=1e-6)
    assert rule.coef == pytest.approx(0.8, rel=1e-5)
    assert all(not o.at_edge for o in rule.optima)
    # The rule predicts the optimum at a budget outside the sweep.
    assert float(rule(1e15)) == pytest.approx(0.8 * 1e15**-0.2, rel=1e-5)


def test_noise_widens_the_interval_and_it_still_covers_the_truth():
    budget, lr, loss = _bowls(0.8, -0.2, [1e10, 1e11, 1e12], [0.35, 0.5, 0.71, 1, 1.41, 2, 2.83],
                              noise=0.004, seed=3)
    rule = fit_rule(budget, lr, loss, n_resamples=300)
    lo, hi = rule.ci["exponent"]
    assert lo < -0.2 < hi
    assert hi - lo > 1e-3


def test_a_budget_whose_best_value_is_at_the_edge_is_a_bound_left_out_of_the_line():
    budget, lr, loss = _bowls(0.8, -0.2, [1e10, 1e11, 1e12], [0.5, 1, 2])
    # Shift the last budget's sweep so its optimum lies below every swept value.
    last = budget == 1e12
    lr = np.where(last, lr * 8, lr)
    loss = np.where(last, 5.0 * 1e12**-0.1 + 0.05 * np.log(lr / (0.8 * 1e12**-0.2)) ** 2, loss)
    rule = fit_rule(budget, lr, loss)
    edge = [o for o in rule.optima if o.at_edge]
    assert len(edge) == 1 and edge[0].x_opt == pytest.approx(lr[last].min())
    assert rule.exponent == pytest.approx(-0.2, abs=1e-6)  # from the two budgets with a vertex


def test_replicates_are_averaged_before_the_optimum():
    x = np.array([1.0, 2.0, 2.0, 4.0])
    loss = np.array([1.10, 1.00, 1.04, 1.10])  # the pair at x=2 averages to 1.02: still the best
    o = budget_optimum(x, loss)
    assert not o.at_edge and o.x_opt == pytest.approx(2.0, rel=1e-9)
    assert o.loss_opt == pytest.approx(1.02, abs=1e-9)


def test_bad_sweeps_are_input_errors_naming_the_budget():
    with pytest.raises(InputError, match="at least 3 distinct values"):
        fit_rule([1e10, 1e10], [1.0, 2.0], [1.0, 0.9])
    with pytest.raises(InputError, match="positive"):
        fit_rule([1e10, 1e10, 1e10], [1.0, -2.0, 3.0], [1.0, 0.9, 1.0])
    with pytest.raises(InputError, match="widen the sweeps"):
        fit_rule([1e10] * 3 + [1e11] * 3, [1, 2, 3] * 2, [3.0, 2.0, 1.0] * 2)


def test_the_default_ladders_lr_rule_is_the_fit_of_its_recorded_sweep():
    """experiments/tiny.py's LR rule is what `ladder fit-rule` makes of experiments/tiny_sweeps.csv.

    Within 5% at every rung and the hero, and its exponent inside the fit's interval: changing the
    recipe or the recorded sweep without the other fails here.
    """
    from ladder.spec import load_spec

    spec = load_spec(str(SWEEPS_CSV.parent / "tiny.py"))
    sweep = pd.read_csv(SWEEPS_CSV)
    lr_rows = sweep[sweep.sweep == "lr"]
    rule = fit_rule(lr_rows.flops, lr_rows.lr, lr_rows.final_eval_loss)
    lo, hi = rule.ci["exponent"]
    for run in spec.rungs + (spec.hero,):
        assert run.optim.lr == pytest.approx(float(rule(run.flops)), rel=0.05), run.name
    # The recipe's exponent: the slope of its resolved LRs between the smallest rung and the hero.
    small, hero = spec.rungs[0], spec.hero
    exponent = np.log(hero.optim.lr / small.optim.lr) / np.log(hero.flops / small.flops)
    assert lo <= exponent <= hi
