import numpy as np
import pytest

import fits
from fits.laws.chinchilla import ChinchillaLaw


def test_compute_law_recovers_known_parameters():
    C = np.geomspace(1e18, 1e22, 12)
    L = 1.9 + 3000.0 * C ** -0.17
    res = fits.fit_compute(C, L)
    assert res.params["E"] == pytest.approx(1.9, rel=1e-3)
    assert res.params["alpha"] == pytest.approx(0.17, rel=1e-3)
    assert res.params["A"] == pytest.approx(3000.0, rel=1e-2)


def test_compute_law_fits_seeds_of_one_budget_through_their_mean():
    # Like the default ladder's backtest: three sizes, two seeds each, 0.5-1.6% apart.
    C = np.repeat([6.02e10, 2.30e11, 6.13e11], 2)
    L = (0.8 + 60.0 * C ** -0.2) * np.array([1.004, 0.996, 1.008, 0.992, 1.002, 0.998])
    res = fits.fit_compute(C, L)
    law = fits.ComputeLaw(**res.params)
    # Three budgets, three parameters: the law passes through each budget's mean log loss, one curve.
    means = np.exp(np.log(L).reshape(3, 2).mean(axis=1))
    np.testing.assert_allclose(law.predict(C[::2]), means, rtol=1e-6)
    # A change far below the seed noise moves the 4x extrapolation by as little, not by a percent.
    again = fits.ComputeLaw(**fits.fit_compute(C, L * (1 + 1e-9 * np.arange(6))).params)
    assert again.predict(2.54e12) == pytest.approx(law.predict(2.54e12), rel=1e-6)
    with pytest.raises(ValueError, match="3 distinct compute budgets, got 2"):
        fits.fit_compute(C[:4], L[:4])


def test_compute_law_with_pinned_E_keeps_it():
    C = np.geomspace(1e18, 1e22, 6)
    L = 1.9 + 3000.0 * C ** -0.17
    res = fits.fit_compute(C, L, pin_E=1.9)
    assert res.params["E"] == 1.9
    assert res.params["alpha"] == pytest.approx(0.17, rel=1e-4)
    with pytest.raises(ValueError, match="below the smallest loss"):
        fits.fit_compute(C, L, pin_E=10.0)


def test_isoflop_recovers_chinchilla_allocation_exponents():
    law = ChinchillaLaw(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
    rows = []
    for C in np.geomspace(1e18, 1e22, 5):
        n_opt, _ = law.compute_optimal(C)
        for N in n_opt * np.geomspace(0.25, 4, 9):
            rows.append((N, C / (6 * N), C))
    N, D, C = map(np.array, zip(*rows, strict=True))
    res = fits.fit_isoflop(N, D, law.predict(N, D), C=C)
    # Approach 2 should find N_opt ~ C^(beta/(alpha+beta)), D_opt ~ C^(alpha/(alpha+beta)).
    assert res.params["a"] == pytest.approx(0.28 / 0.62, abs=0.01)
    assert res.params["b"] == pytest.approx(0.34 / 0.62, abs=0.01)
    assert res.diagnostics["n_budgets"] == 5
    n_pred, _ = fits.compute_optimal(res, 1e21)
    assert n_pred == pytest.approx(law.compute_optimal(1e21)[0], rel=0.05)


def test_isoflop_needs_bracketed_minima():
    N = np.array([1e8, 2e8, 4e8])
    with pytest.raises(ValueError, match="at least 2 budgets"):
        fits.fit_isoflop(N, 1e19 / (6 * N), [3.0, 2.9, 2.95])


def test_moe_uses_active_params_by_default():
    law = ChinchillaLaw(E=1.7, A=400.0, B=1500.0, alpha=0.33, beta=0.3)
    N = np.geomspace(1e7, 1e10, 6).repeat(3)
    D = N * np.tile([10, 30, 90], 6)
    import pandas as pd

    runs = pd.DataFrame({"params": N * 8, "active_params": N, "tokens": D, "loss": law.predict(N, D)})
    res = fits.fit(runs, "chinchilla")
    assert res.config["use_active"] is True
    assert res.params["alpha"] == pytest.approx(0.33, rel=1e-3)
    total = fits.fit(runs, "chinchilla", use_active=False)
    assert total.params["A"] != pytest.approx(400.0, rel=0.01)  # N scaled by 8 moves A by 8^alpha
