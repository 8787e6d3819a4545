"""A stated prior on the compute law's E (FitSpec.E_prior): it pins what noisy rungs cannot, yields to precise
ones, and every refit (the bootstrap, the rungs' carried luck) weighs it as the fit did."""

import numpy as np
import pandas as pd
import pytest

import fits
from fits.compute import PRIOR_FALLBACK_SIGMA, fit_compute, refit_compute
from fits.uncertainty import bootstrap

# Seven budgets over two decades, like the default ladder's, on a law with a sizeable floor.
C = np.geomspace(3e10, 3.5e12, 7)
TRUE = fits.ComputeLaw(E=0.6, A=2.0e3, alpha=0.35)


def noisy(scale: float, seed: int) -> np.ndarray:
    return TRUE.predict(C) * np.exp(scale * np.random.default_rng(seed).standard_normal(C.size))


def test_exact_rungs_outweigh_the_prior():
    # Noise-free rungs pin E themselves: a prior centred far off moves the fit by a hair.
    res = fit_compute(C, TRUE.predict(C), E_prior=(0.2, 0.2))
    assert res.params["E"] == pytest.approx(0.6, rel=0.02)
    assert res.config["E_prior"]["mean"] == 0.2
    assert "prior on E" in res.diagnostics["loss"]


def test_noisy_rungs_lean_on_the_prior_more_than_precise_ones():
    # The same draws of luck at two noise levels: the prior's pull on E grows with the rungs' scatter.
    pulls = {}
    for scale in (0.002, 0.015):
        gaps = []
        for seed in range(6):
            L = noisy(scale, seed)
            free = fit_compute(C, L).params["E"]
            held = fit_compute(C, L, E_prior=(1.0, 0.1)).params["E"]
            gaps.append(held - free)
        pulls[scale] = np.mean(gaps)
    assert pulls[0.015] > 2 * pulls[0.002] > 0
    # ... and the weight reads the scatter: about the noise put in.
    sigma = fit_compute(C, noisy(0.015, 0), E_prior=(1.0, 0.1)).config["E_prior"]["sigma"]
    assert 0.005 < sigma < 0.03


def test_three_budgets_take_the_fallback_noise():
    res = fit_compute(C[[0, 3, 6]], noisy(0.01, 1)[[0, 3, 6]], E_prior=(0.6, 0.2))
    assert res.config["E_prior"]["sigma"] == PRIOR_FALLBACK_SIGMA


def test_refits_carry_the_prior():
    L = noisy(0.012, 3)
    res = fit_compute(C, L, E_prior=(0.9, 0.05))
    # A refit on the fit's own data lands where the fit did (the prior and its weight came with the config).
    again = refit_compute(res, C, L[None, :])[0]
    np.testing.assert_allclose(again, [res.params["E"], res.params["A"], res.params["alpha"]], rtol=1e-3)
    # The bootstrap's resamples keep E near the fit's under a tight prior; without it they spread far wider.
    runs = pd.DataFrame({"params": C, "tokens": C, "flops": C, "loss": L})
    with_prior = np.array(bootstrap(runs, "compute", base=res, n_resamples=60, seed=0).samples["E"])
    free = np.array(bootstrap(runs, "compute", n_resamples=60, seed=0).samples["E"])
    assert np.std(with_prior) < 0.5 * np.std(free)
    assert abs(np.median(with_prior) - res.params["E"]) < 0.05


def test_bad_priors_are_refused():
    with pytest.raises(ValueError, match="E_prior"):
        fit_compute(C, TRUE.predict(C), E_prior=(0.6, 0.0))
    with pytest.raises(ValueError, match="not given with pin_E"):
        fit_compute(C, TRUE.predict(C), E_prior=(0.6, 0.2), pin_E=0.6)
    with pytest.raises(ValueError, match="does not take one"):
        fits.fit({"params": C, "tokens": C, "flops": C, "loss": TRUE.predict(C)}, "chinchilla", E_prior=(0.6, 0.2))
