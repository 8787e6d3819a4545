"""fits.threads: every loaded BLAS at one thread inside the fits, the caller's setting restored after,
including scipy's own OpenBLAS when scipy is first imported after the limit was first used (or inside
an outer block), and when fits run in several threads at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from patience import HANG_S

# Run in a fresh interpreter: scipy.linalg must not be loaded yet when the limit is first used, and
# the BLAS default is pinned at 2 threads so a 1-core machine would still show the difference.
PROBE = """
import json
import numpy as np
from threadpoolctl import threadpool_info
from fits.threads import one_blas_thread

def blas():
    return sorted((i["filepath"].rsplit("/", 1)[-1], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas")

out = {"numpy_before": blas()}
with one_blas_thread():
    out["numpy_inside"] = blas()
with one_blas_thread():
    import scipy.optimize  # brings scipy's own OpenBLAS, inside an outer block
    with one_blas_thread():
        out["nested_inside"] = blas()
out["both_before"] = blas()
with one_blas_thread():
    out["both_inside"] = blas()
out["both_after"] = blas()

# Fits in several threads at once: whatever the interleaving, the caller's setting comes back.
import threading
from fits.compute import fit_compute
flops = np.logspace(18, 21, 8)
workers = [threading.Thread(target=fit_compute, args=(flops, 1.7 + 400 * flops ** -0.15)) for _ in range(4)]
for w in workers:
    w.start()
for w in workers:
    w.join()
out["after_threads"] = blas()
print(json.dumps(out))
"""


def test_one_blas_thread_limits_every_loaded_blas_and_restores_it():
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["numpy_before"] and all(n == 2 for _, n in out["numpy_before"]), out
    assert all(n == 1 for _, n in out["numpy_inside"]), out
    assert len(out["both_before"]) > len(out["numpy_before"]), out  # scipy's library is a second one
    assert all(n == 2 for _, n in out["both_before"]), out  # the nested block restored both
    assert len(out["nested_inside"]) == len(out["both_before"]) and all(n == 1 for _, n in out["nested_inside"]), out
    assert all(n == 1 for _, n in out["both_inside"]), out  # scipy's too, though loaded after the first use
    assert out["both_after"] == out["both_before"] == out["after_threads"], out


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_a_fit_leaves_the_callers_blas_threads_as_they_were():
    import numpy as np
    import pytest
    import scipy.optimize  # noqa: F401  (its BLAS loaded before the "before" reading)
    from threadpoolctl import threadpool_limits

    from fits.compute import fit_compute

    flops = np.logspace(18, 21, 8)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        res = fit_compute(flops, 1.7 + 400 * flops ** -0.15)
        after = _blas_threads()
    assert after == before == [2] * len(before)
    assert res.params["alpha"] == pytest.approx(0.15, rel=1e-3)


def test_the_optimisers_run_their_objective_on_one_blas_thread():
    import numpy as np
    import scipy.optimize  # noqa: F401  (both BLAS libraries loaded: the polish uses scipy's)
    from threadpoolctl import threadpool_limits

    from fits.lbfgs import multistart

    seen = []
    target = np.array([1.0, -2.0, 0.5])

    def fun(X, rows):  # a quadratic bowl, batched: f and its gradient for every row of X
        seen.append(max(_blas_threads()))
        d = X - target
        return (d * d).sum(axis=1), 2 * d

    with threadpool_limits(limits=2, user_api="blas"):
        best, _, ok, _ = multistart(fun, np.zeros((4, 3)) + np.arange(4)[:, None], n_polish=2)
    assert ok and np.allclose(best, target)
    assert seen and set(seen) == {1}, sorted(set(seen))  # the batched descent and scipy's polish alike
