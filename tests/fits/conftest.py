"""Fixtures for the fits tests: the project's reference data and fits shared by tests."""

from __future__ import annotations

import pytest

from fits import reference


@pytest.fixture(scope="session")
def ref_dir():
    return reference.data_dir()


@pytest.fixture(scope="session")
def chinchilla_runs(ref_dir):
    return reference.chinchilla_epoch()


@pytest.fixture(scope="session")
def chinchilla_fit(chinchilla_runs):
    import fits

    return fits.fit(chinchilla_runs, "chinchilla")


@pytest.fixture(scope="session")
def holdout(chinchilla_runs):
    """Epoch's data split at C = 1e20: fit below (136 runs), predict above (104 runs)."""
    import fits

    train = chinchilla_runs[chinchilla_runs["flops"] < 1e20].reset_index(drop=True)
    test = chinchilla_runs[chinchilla_runs["flops"] >= 1e20].reset_index(drop=True)
    res = fits.bootstrap(train, "chinchilla", n_resamples=300, seed=0)
    return train, test, res
