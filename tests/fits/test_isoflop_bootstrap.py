"""fits.isoflop.bootstrap_isoflop: intervals of the IsoFLOP frontier from a residual bootstrap."""

from __future__ import annotations

import numpy as np

from fits.isoflop import bootstrap_isoflop, parabola_residuals

# A Chinchilla-shaped loss: at budget C = 6ND the optimum is N_opt ~ C^(beta / (alpha + beta)).
E, A, B, ALPHA, BETA = 1.7, 400.0, 1000.0, 0.34, 0.28
TRUE_A = BETA / (ALPHA + BETA)


def _sweep(noise: float, seed: int, sizes_per_budget: int = 5):
    rng = np.random.default_rng(seed)
    N, D, L, C, lab = [], [], [], [], []
    for k, c in enumerate((1e18, 3e18, 1e19, 3e19)):
        n_opt = 0.1 * c ** TRUE_A  # near the optimum, so each parabola brackets its minimum
        for n in n_opt * np.geomspace(1 / 6, 6, sizes_per_budget):
            d = c / (6 * n)
            N.append(n), D.append(d), C.append(c), lab.append(k)
            L.append(E + A / n ** ALPHA + B / d ** BETA + rng.normal(0, noise))
    return [np.array(v) for v in (N, D, L, C, lab)]


def test_intervals_contain_the_estimate_and_mostly_the_truth():
    covered = 0
    for seed in range(8):
        N, D, L, C, lab = _sweep(noise=0.004, seed=seed)
        out = bootstrap_isoflop(N, D, L, C, lab, n_boot=100, level=0.9, seed=seed)
        a = out["fit"].params["a"]
        lo, hi = out["intervals"]["a"]
        assert lo <= a <= hi
        n_opts = [b["N_opt"] for b in out["budgets"]]
        assert n_opts == sorted(n_opts)
        for b in out["budgets"]:
            assert b["N_opt_lower"] <= b["N_opt"] <= b["N_opt_upper"]
        covered += lo <= TRUE_A <= hi
    # A 90% interval from 8 residual dof per fit: most draws cover the true exponent, not all must.
    assert covered >= 5, covered


def test_exact_parabolas_have_no_interval_and_say_why():
    N, D, L, C, lab = _sweep(noise=0.004, seed=0, sizes_per_budget=3)
    assert np.allclose(parabola_residuals(N, L, lab), 0, atol=1e-9)
    out = bootstrap_isoflop(N, D, L, C, lab, n_boot=50)
    assert np.isnan(out["intervals"]["a"]).all()
    assert "more than 3 sizes" in out["method"]
    assert out["n_ok"] == 0
