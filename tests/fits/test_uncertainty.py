import numpy as np
import pytest

import fits
from fits.result import FitResult

# Epoch's published bootstrap intervals (maximum likelihood, 4,000 resamples).
EPOCH_CI = {"E": (1.769, 1.871), "A": (285, 744), "B": (1042, 5810), "alpha": (0.317, 0.373), "beta": (0.331, 0.415)}


@pytest.fixture(scope="module")
def boot(chinchilla_runs, chinchilla_fit):
    return fits.bootstrap(chinchilla_runs, "chinchilla", n_resamples=1000, seed=1, base=chinchilla_fit)


def test_bootstrap_intervals_overlap_epochs(boot):
    assert len(boot.samples["E"]) == 1000
    assert boot.diagnostics["bootstrap"]["converged"] >= 990
    for k, (lo, hi) in EPOCH_CI.items():
        blo, bhi = boot.ci[k]
        assert blo < hi and lo < bhi, k  # the intervals overlap
        assert blo < boot.params[k] < bhi


def test_bootstrap_is_reproducible_by_seed(chinchilla_runs, chinchilla_fit):
    a = fits.bootstrap(chinchilla_runs, n_resamples=20, seed=7, base=chinchilla_fit)
    b = fits.bootstrap(chinchilla_runs, n_resamples=20, seed=7, base=chinchilla_fit)
    assert a.samples == b.samples


def test_holdout_error_at_the_global_optimum(holdout):
    train, test, res = holdout
    assert len(train) == 136 and len(test) == 104
    err = np.abs(fits.predict(res, test) / test["loss"].to_numpy() - 1)
    assert err.mean() <= 0.009


def test_calibrated_band_covers_the_holdout_where_the_plain_bootstrap_does_not(holdout):
    train, test, res = holdout
    y = test["loss"].to_numpy()
    plain = fits.prediction_band(res, test, 0.9)
    plain_cov = np.mean((y >= plain["lower"]) & (y <= plain["upper"]))
    cal = fits.calibrate(res, train)
    band = fits.calibrated_interval(cal, test, 0.9)
    cov = np.mean((y >= band["lower"]) & (y <= band["upper"]))
    assert plain_cov < 0.5
    assert cov >= 0.8
    assert np.all(band["lower"] <= band["loss"]) and np.all(band["loss"] <= band["upper"])
    # the band widens with distance beyond the data
    far = test["flops"].to_numpy() > 3e21
    width = (band["upper"] - band["lower"]) / band["loss"]
    assert width[far].mean() > width[~far].mean()


def test_backtest_leave_largest_out(chinchilla_runs):
    bt = fits.backtest(chinchilla_runs.sample(60, random_state=0), "compute", holdout=3)
    assert len(bt) == 3 and bt["n_fit"].iloc[0] == 57
    assert set(bt.columns) >= {"predicted", "rel_err", "decades", "loss"}
    assert np.all(bt["decades"] >= 0)
    np.testing.assert_allclose(bt["rel_err"], bt["predicted"] / bt["loss"] - 1)


def test_json_round_trip_keeps_samples_ci_and_calibration(holdout):
    train, test, res = holdout
    back = FitResult.from_json(res.to_json())
    assert back == res
    np.testing.assert_allclose(fits.prediction_band(back, test)["upper"], fits.prediction_band(res, test)["upper"])
