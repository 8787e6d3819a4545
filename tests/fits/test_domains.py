"""The per-domain compute law: one law per eval domain, summed with the mixture's weights."""

import numpy as np
import pytest

import fits
from fits.result import FitResult


def _two_domains(C):
    # A code-like domain with no visible floor and a prose-like one with a high floor: their mean bends.
    code = 30.0 * C ** -0.10
    prose = 0.6 + 110.0 * C ** -0.17
    return {"code": code, "prose": prose}


def test_per_domain_law_recovers_each_domain_where_one_law_on_the_mixture_cannot():
    C = np.repeat(np.geomspace(6e10, 2.5e12, 5), 2)
    by_domain = _two_domains(C)
    weights = {"code": 0.5, "prose": 0.5}
    mixture = 0.5 * by_domain["code"] + 0.5 * by_domain["prose"]
    target = 30 * 2.5e12  # 30x past the largest budget
    truth = sum(weights[d] * v for d, v in _two_domains(np.array([target])).items())[0]

    res = fits.fit_compute_domains(C, by_domain, weights)
    summed = float(res.predict([target])[0])
    one = float(fits.fit_compute(C, mixture).predict([target])[0])
    # Noiseless: the sum of per-domain laws is the truth; one law through the mixture's mean is not
    # (measured +0.28% at 30x: its free E absorbs most of the bend). With 0.3% noise per point both
    # miss by up to 2-3% at 30x (six seeds), so this asserts identifiability, not a better forecast.
    assert summed == pytest.approx(truth, rel=1e-4)
    assert abs(one / truth - 1) > 1e-3
    # The law's prediction is the weighted sum of its domains' laws, and each domain keeps its own exponent.
    law = res.model()
    parts = law.predict_domains([target])
    assert summed == pytest.approx(0.5 * parts["code"][0] + 0.5 * parts["prose"][0], rel=1e-12)
    assert res.params["code.alpha"] < res.params["prose.alpha"]


def test_per_domain_law_round_trips_through_json_and_normalises_weights():
    C = np.geomspace(1e10, 1e12, 4)
    res = fits.fit_compute_domains(C, _two_domains(C), {"code": 2.0, "prose": 6.0})
    assert res.config["weights"] == pytest.approx([0.25, 0.75])
    again = FitResult.from_json(res.to_json())
    np.testing.assert_allclose(again.predict(C * 10), res.predict(C * 10), rtol=1e-12)


def test_per_domain_law_names_a_domain_without_a_weight():
    C = np.geomspace(1e10, 1e12, 4)
    with pytest.raises(ValueError, match="no weight for domain.*prose"):
        fits.fit_compute_domains(C, _two_domains(C), {"code": 1.0})
