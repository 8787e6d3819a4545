"""The fits commands through the real `ladder` group (CliRunner), including bad input and the
honesty of the bands they print."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fits.laws.chinchilla import ChinchillaLaw

cli = pytest.importorskip("ladder.cli.main")


def run(args):
    r = CliRunner().invoke(cli.main, args)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory):
    law = ChinchillaLaw(E=1.7, A=400.0, B=1500.0, alpha=0.33, beta=0.3)
    rng = np.random.default_rng(0)
    N = np.geomspace(1e7, 1e9, 6).repeat(4)
    D = N * np.tile([5, 20, 80, 320], 6)
    L = law.predict(N, D) * np.exp(rng.normal(0, 0.003, N.size))
    p = tmp_path_factory.mktemp("cli") / "runs.csv"
    pd.DataFrame({"params": N, "tokens": D, "loss": L}).to_csv(p, index=False)
    return p


def test_fit_json_with_bootstrap_then_predict_points(runs_csv, tmp_path):
    fit_json = tmp_path / "FIT.json"
    code, out, err = run(["fit", str(runs_csv), "--law", "chinchilla", "--bootstrap", "50", "--seed", "3",
                          "--json", "--out", str(fit_json)])
    assert code == 0, err
    d = json.loads(out)
    assert d["law"] == "chinchilla" and d["n_points"] == 24
    assert set(d["params"]) == {"E", "A", "B", "alpha", "beta"}
    for k, (lo, hi) in d["ci"].items():
        assert lo <= d["params"][k] <= hi, k
    pts = tmp_path / "points.csv"
    pd.DataFrame({"params": [1e9, 1e10], "tokens": [2e10, 2e11]}).to_csv(pts, index=False)
    pred = tmp_path / "pred.csv"
    code, out, err = run(["predict", str(fit_json), "--points", str(pts), "--level", "0.8", "--out", str(pred)])
    assert code == 0, err
    df = pd.read_csv(pred)
    assert list(df.columns[:2]) == ["params", "tokens"] and {"loss", "lower", "upper"} <= set(df.columns)
    assert np.all(df["lower"] < df["loss"]) and np.all(df["loss"] < df["upper"])
    code, out, err = run(["predict", str(fit_json), "--params", "1e9", "--tokens", "2e10", "--json"])
    assert code == 0, err
    one = json.loads(out)
    code, out, err = run(["predict", str(fit_json), "--points", str(pts), "--json"])
    assert code == 0, err
    many = json.loads(out)
    # one shape whatever the input: an object with a list of predictions and how the band was made
    assert set(one) == set(many) == {"fit", "law", "level", "interval", "predictions", "out"}
    assert len(one["predictions"]) == 1 and len(many["predictions"]) == 2
    assert one["predictions"][0]["loss"] == pytest.approx(df["loss"].iloc[0])
    assert one["level"] == 0.9 and one["interval"]["kind"] in ("calibrated", "bootstrap")


def test_fit_compute_and_isoflop_laws(runs_csv, tmp_path):
    code, out, err = run(["fit", str(runs_csv), "--law", "compute", "--json"])
    assert code == 0, err
    assert set(json.loads(out)["params"]) == {"E", "A", "alpha"}
    code, out, err = run(["fit", str(runs_csv), "--law", "compute", "--pin-E", "1.7", "--json"])
    assert code == 0, err
    assert json.loads(out)["params"]["E"] == 1.7
    code, out, err = run(["fit", str(runs_csv), "--law", "compute", "--E-prior", "0.5,0.1"])
    assert code == 0, err
    assert "(prior 0.5 +- 0.1, weighed at the rungs' scatter" in out
    for args, needle in ((["--E-prior", "0.5"], "give MEAN,SD"), (["--E-prior", "0.5,-1"], "must both be positive"),
                         (["--E-prior", "0.5,0.1", "--pin-E", "1.7"], "without --pin-E")):
        code, out, err = run(["fit", str(runs_csv), "--law", "compute", *args])
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and needle in lines[0], (args, err)


def test_curve_fit_and_curve_predict(tmp_path):
    from fits.laws.curves import TissueLaw

    law = TissueLaw(L0=2.4, A=0.5, alpha=0.5, C=0.3)
    s = np.arange(4001)
    lr = 1e-4 + 0.5 * 9e-4 * (1 + np.cos(np.pi * s / 4000))
    at = np.arange(100, 4001, 50)
    curve = tmp_path / "curve.csv"
    pd.DataFrame({"step": at, "lr": lr[at], "loss": law.predict(s, lr, at=at)}).to_csv(curve, index=False)
    fit_json = tmp_path / "cfit.json"
    code, out, err = run(["curve-fit", str(curve), "--law", "tissue", "--out", str(fit_json)])
    assert code == 0, err
    sched = tmp_path / "sched.csv"
    pd.DataFrame({"step": at, "lr": np.full(at.size, 5e-4)}).to_csv(sched, index=False)
    pred = tmp_path / "cpred.csv"
    code, out, err = run(["curve-predict", str(fit_json), str(sched), "--out", str(pred)])
    assert code == 0, err
    df = pd.read_csv(pred)
    assert list(df.columns) == ["step", "lr", "loss"] and len(df) == at.size
    assert np.all(np.diff(df["loss"]) < 0)  # a constant lr: loss falls monotonically


def _bad_csvs(tmp_path):
    good = {"params": [1e8] * 6, "tokens": [1e9, 2e9, 4e9, 8e9, 1.6e10, 3.2e10], "loss": [3.5, 3.3, 3.1, 3.0, 2.9, 2.85]}
    cases = {}
    df = pd.DataFrame(good).drop(columns="loss")
    cases["missing column"] = (df, "missing column 'loss'")
    df = pd.DataFrame(good)
    df.loc[2, "tokens"] = -5
    cases["negative"] = (df, "column 'tokens' row 4")
    df = pd.DataFrame(good)
    df.loc[1, "loss"] = np.nan
    cases["nan"] = (df, "column 'loss' row 3 is empty")  # as the user wrote it, not np.float64(nan)
    cases["too few"] = (pd.DataFrame(good).iloc[:3], "at least 5")
    out = {}
    for name, (frame, needle) in cases.items():
        p = tmp_path / f"{name.replace(' ', '_')}.csv"
        frame.to_csv(p, index=False)
        out[name] = (p, needle)
    return out


def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path):
    for name, (p, needle) in _bad_csvs(tmp_path).items():
        out_json = tmp_path / f"{p.stem}.json"
        code, out, err = run(["fit", str(p), "--out", str(out_json)])
        assert code == 2, name
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0] and str(p) in lines[0], (name, err)
        assert "Traceback" not in err + out and "np.float64" not in err
        assert not out_json.exists()
    for args, needle in [
        (["fit", str(tmp_path / "nope.csv")], "no such file"),
        (["fit", str(tmp_path / "too_few.csv"), "--bootstrap", "1"], "--bootstrap"),
        (["fit", str(tmp_path / "too_few.csv"), "--law", "ols"], "--law"),
        (["predict", str(tmp_path / "nope.json"), "--params", "1e9", "--tokens", "1e10"], "no such file"),
        (["curve-predict", str(tmp_path / "too_few.csv"), str(tmp_path / "too_few.csv")], "not a FIT.json"),
    ]:
        code, out, err = run(args)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and needle in lines[0], (args, err)


def test_predict_rejects_bad_level_and_missing_point(runs_csv, tmp_path):
    fit_json = tmp_path / "FIT.json"
    assert run(["fit", str(runs_csv), "--out", str(fit_json)])[0] == 0
    code, _, err = run(["predict", str(fit_json), "--params", "1e9", "--tokens", "1e10", "--level", "1.5"])
    assert code == 2 and "level" in err
    code, _, err = run(["predict", str(fit_json), "--params", "1e9"])
    assert code == 2 and "--tokens" in err
    pred = tmp_path / "p.csv"
    code, _, err = run(["predict", str(fit_json), "--params", "-1e9", "--tokens", "1e10", "--out", str(pred)])
    assert code == 2 and "--params" in err and not pred.exists()


def test_fit_rule_on_a_recorded_sweep_and_its_bad_input(tmp_path):
    from pathlib import Path

    sweeps = Path(__file__).resolve().parents[2] / "experiments" / "tiny_sweeps.csv"
    code, out, _ = run(["fit-rule", str(sweeps), "--where", "sweep=lr", "--json"])
    assert code == 0
    rule = json.loads(out)
    assert -0.3 < rule["exponent"] < -0.1 and len(rule["optima"]) == 3
    # Without --where the batch sweep's rows join the LR sweep's and the optima change.
    code, out_all, _ = run(["fit-rule", str(sweeps), "--json"])
    assert code == 0 and json.loads(out_all)["optima"] != rule["optima"]
    for args, needle in ((["--where", "sweep"], "COL=VALUE"), (["--where", "sweep=none"], "no rows left"),
                         (["--x", "momentum"], "missing column 'momentum'")):
        code, out, err = run(["fit-rule", str(sweeps), *args])
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and not out


def test_predict_gives_the_calibrated_band_by_default_on_chinchillas_split(chinchilla_runs, tmp_path):
    """The user's path (issue 16): fit the runs below 1e20 FLOPs with a bootstrap, predict the 104
    above at 90%. The plain bootstrap band covered 29% of them; the default must be the calibrated
    band, and say so."""
    low, high = tmp_path / "low.csv", tmp_path / "high.csv"
    chinchilla_runs[chinchilla_runs["flops"] < 1e20].to_csv(low, index=False)
    test = chinchilla_runs[chinchilla_runs["flops"] >= 1e20].reset_index(drop=True)
    test.to_csv(high, index=False)
    fit_json = tmp_path / "fit.json"
    code, out, err = run(["fit", str(low), "--bootstrap", "100", "--out", str(fit_json)])
    assert code == 0, err
    assert "bands: calibrated" in out
    code, out, err = run(["predict", str(fit_json), "--points", str(high), "--level", "0.9", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["interval"]["kind"] == "calibrated" and "nested backtests" in d["interval"]["text"]
    pred = pd.DataFrame(d["predictions"])
    y = test["loss"].to_numpy()
    coverage = np.mean((pred["lower"] <= y) & (y <= pred["upper"]))
    assert coverage >= 0.8, coverage
    assert np.all(pred["decades_beyond"] > 0)
    code, out, err = run(["predict", str(fit_json), "--points", str(high)])
    assert code == 0 and "interval: calibrated" in out.splitlines()[-1]
    # opting out gives the bootstrap band, labelled as such
    plain = tmp_path / "plain.json"
    assert run(["fit", str(low), "--bootstrap", "100", "--no-calibrate", "--out", str(plain)])[0] == 0
    d = json.loads(run(["predict", str(plain), "--points", str(high), "--json"])[1])
    assert d["interval"]["kind"] == "bootstrap" and "too narrow" in d["interval"]["text"]
    narrow = pd.DataFrame(d["predictions"])
    assert np.all(narrow["upper"] - narrow["lower"] < pred["upper"] - pred["lower"])


def _three_runs(tmp_path):
    C = np.array([1e18, 1e19, 1e20])
    L = 1.7 + 1600 * C ** -0.165
    p = tmp_path / "three.csv"
    pd.DataFrame({"params": np.sqrt(C / 120), "tokens": 20 * np.sqrt(C / 120), "flops": C, "loss": L}).to_csv(p, index=False)
    return p


def test_a_bootstrap_with_as_many_parameters_as_points_is_refused_not_zero_width(tmp_path):
    p = _three_runs(tmp_path)
    out_json = tmp_path / "fit.json"
    code, out, err = run(["fit", str(p), "--law", "compute", "--bootstrap", "200", "--out", str(out_json)])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "3 compute budgets" in lines[0] and "E, A, alpha" in lines[0] and "--pin-E" in lines[0]
    assert not out_json.exists() and "Traceback" not in err
    # with E pinned one residual degree of freedom is left: the interval has width, and says it is bootstrap-only
    code, out, err = run(["fit", str(p), "--law", "compute", "--bootstrap", "200", "--pin-E", "1.6",
                          "--out", str(out_json)])
    assert code == 0, err
    assert "not calibrated" in err
    d = json.loads(run(["predict", str(out_json), "--flops", "1e22", "--json"])[1])
    band = d["predictions"][0]
    assert band["upper"] > band["loss"] > band["lower"] and d["interval"]["kind"] == "bootstrap"


def test_a_bare_fit_prints_no_interval_rather_than_a_zero_width_one(tmp_path):
    p = _three_runs(tmp_path)
    out_json = tmp_path / "fit.json"
    assert run(["fit", str(p), "--law", "compute", "--out", str(out_json)])[0] == 0
    code, out, err = run(["predict", str(out_json), "--flops", "1e21"])
    assert code == 0 and "(no interval)" in out and "--bootstrap" in out
    d = json.loads(run(["predict", str(out_json), "--flops", "1e21", "--json"])[1])
    assert d["interval"]["kind"] == "none" and d["predictions"][0]["lower"] is None


def test_curve_predict_scores_schedules_per_schedule_and_both_averages(tmp_path):
    """Why the 400M hold-out read 0.266% through the CLI and 0.189% in the library: the mean over all
    points weighs long schedules more than the mean of per-schedule means. Both are reported."""
    from fits.laws.curves import TissueLaw

    law = TissueLaw(L0=2.4, A=0.5, alpha=0.5, C=0.3)
    fit_json = tmp_path / "cfit.json"
    paths = []
    for name, total, every in (("short", 2000, 100), ("long", 8000, 50)):
        s = np.arange(total + 1)
        lr = 1e-4 + 0.5 * 9e-4 * (1 + np.cos(np.pi * s / total))
        at = np.arange(every, total + 1, every)
        loss = law.predict(s, lr, at=at) * (1 + (0.004 if name == "long" else 0.001))
        p = tmp_path / f"{name}.csv"
        pd.DataFrame({"step": at, "lr": lr[at], "loss": loss}).to_csv(p, index=False)
        paths.append(p)
    assert run(["curve-fit", str(paths[0]), "--law", "tissue", "--out", str(fit_json)])[0] == 0
    code, out, err = run(["curve-predict", str(fit_json), *map(str, paths), "--json"])
    assert code == 0, err
    d = json.loads(out)
    e = d["errors"]
    per = {s["schedule"]: s for s in e["per_schedule"]}
    n = [per[str(p)]["n_points"] for p in paths]
    m = [per[str(p)]["mean_abs_rel_err"] for p in paths]
    assert n == [20, 160]
    assert e["mean_of_schedule_means"] == pytest.approx(np.mean(m))
    assert e["mean_over_points"] == pytest.approx(np.average(m, weights=n))
    assert e["mean_over_points"] > e["mean_of_schedule_means"]  # the long schedule is the worse one here
    assert {r["schedule"] for r in d["predictions"]} == {str(p) for p in paths}
    code, out, err = run(["curve-predict", str(fit_json), *map(str, paths)])
    assert code == 0 and "averaged over schedules" in err and out.startswith("schedule,step,lr,loss")


def test_the_library_takes_a_path_or_a_frame_with_its_own_errors(runs_csv):
    import fits

    from_path = fits.fit(str(runs_csv), "compute")
    from_frame = fits.fit(fits.read_runs(runs_csv), "compute")
    assert from_path.params == from_frame.params
    frame = pd.read_csv(runs_csv)
    with pytest.raises(fits.InputError, match="missing column 'loss'.*add a 'loss' column"):
        fits.fit(frame.drop(columns="loss"))
    frame.loc[2, "loss"] = np.nan
    with pytest.raises(fits.InputError, match=r"column 'loss' row 2 is NaN") as err:
        fits.fit(frame)
    assert "np.float64" not in str(err.value)
    with pytest.raises(fits.InputError, match="DataFrame or the path"):
        fits.fit([1, 2, 3])
    boot = fits.bootstrap(fits.read_runs(runs_csv), "compute", n_resamples=30, seed=1)
    text = boot.summary()
    assert text.splitlines()[0].startswith("compute law on 24 points")
    assert "90% [" in text and "bands: bootstrap only" in text
    assert boot.diagnostics["bootstrap"]["level"] == fits.DEFAULT_LEVEL == 0.9


def test_import_fits_loads_neither_scipy_nor_pandas_until_used():
    import subprocess
    import sys

    code = ("import sys, fits; heavy = [m for m in ('pandas', 'scipy', 'scipy.signal') if m in sys.modules]; "
            "fits.fit; print(heavy, 'pandas' in sys.modules, fits.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "[]" and out[1] == "True" and out[2] != "0+unknown", out
