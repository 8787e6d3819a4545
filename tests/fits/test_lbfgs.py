import numpy as np

from fits.lbfgs import minimize_batched, multistart


def rosenbrock(X, rows):
    x, y = X[:, 0], X[:, 1]
    f = (1 - x) ** 2 + 100 * (y - x * x) ** 2
    g = np.stack([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)], axis=1)
    return f, g


def test_batched_rosenbrock_all_rows_converge():
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-2, 2, size=(64, 2))
    res = minimize_batched(rosenbrock, x0, gtol=1e-10, ftol=0.0, max_iter=2000)
    assert res.converged.all()
    np.testing.assert_allclose(res.x, 1.0, atol=1e-6)


def test_rows_receive_their_own_problem_index():
    targets = np.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 4.0]])

    def quad(X, rows):
        d = X - targets[rows]
        return 0.5 * np.sum(d * d, axis=1), d

    res = minimize_batched(quad, np.zeros((3, 2)))
    np.testing.assert_allclose(res.x, targets, atol=1e-8)


def test_non_finite_trial_steps_are_rejected_not_accepted():
    # log barrier: f is +inf for x <= 0; the minimum is at x = 1
    def barrier(X, rows):
        x = X[:, 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.where(x > 0, x - np.log(x), np.inf)
        return f, (1 - 1 / x)[:, None]

    res = minimize_batched(barrier, np.array([[0.01], [50.0]]))
    np.testing.assert_allclose(res.x[:, 0], 1.0, atol=1e-6)


def test_multistart_picks_the_global_minimum():
    # two basins: f = (x^2 - 1)^2 + 0.3 x, global minimum near x = -1
    def f2(X, rows):
        x = X[:, 0]
        return (x * x - 1) ** 2 + 0.3 * x, (4 * x * (x * x - 1) + 0.3)[:, None]

    best, fbest, ok, _ = multistart(f2, np.array([[2.0], [0.5], [-0.3]]), n_polish=3)
    assert best[0] < -0.9 and ok
