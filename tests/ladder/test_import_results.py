"""Marin's 535B ladder through the real CLI with no training: planned and priced, its recorded rung
curves imported, the hero forecast from them (ours and Marin's baseline), and only then the
hero's recorded points imported and scored.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from patience import HANG_S

from fits import reference
from fits.errors import InputError

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
MARIN = str(REPO / "experiments" / "marin_moe_535b.py")
# Marin's _active_params and totals (fits/reference_data/marin_moe_535b/README.md)
MARIN_ACTIVE = {"d768": 60_555_264, "d1024": 162_004_992, "d1536": 481_296_384, "d2048": 1_170_735_104,
                "d6144": 22_762_487_808}
MARIN_TOTAL = {"d768": 1_588_199_424, "d1024": 3_973_054_464, "d1536": 11_520_442_368, "d2048": 27_717_533_696,
               "d6144": 535_305_388_032}


def hoffmann(n: float, d: float) -> float:
    return 1.69 + 406.4 / n ** 0.34 + 410.7 / d ** 0.28


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)


def test_plan_prices_the_hero_on_the_accelerator_named():
    proc = run_cli("plan", MARIN, "--json", "--accelerator", "GB200", "--mfu", "0.3", "--chips", "792")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    steps = {r["step"]: r for r in doc["steps"]}
    assert {"d768", "d1024", "d1536", "d2048"} <= set(steps) and "d6144" not in steps  # trained elsewhere
    runs = {r["name"]: r for r in doc["runs"]}
    for name, active in MARIN_ACTIVE.items():
        assert runs[name]["params_active"] == pytest.approx(active, rel=0.01)
        assert runs[name]["params_total"] == pytest.approx(MARIN_TOTAL[name], rel=0.01)
    hero = runs["d6144"]
    assert hero["steps"] == 390_251 and hero["tokens"] == 390_251 * 11_264 * 4096
    assert hero["flops_baseline"] == pytest.approx(2.6108941613772703e24, rel=1e-9)  # Marin's figure
    assert hero["flops"] > hero["flops_baseline"]  # ours counts the lm_head and attention
    assert hero["days"] == pytest.approx(hero["flops"] / (0.3 * 2.5e15) / 792 / 86400, rel=1e-9)
    text = run_cli("plan", MARIN, "--accelerator", "GB200", "--chips", "792").stdout
    assert "on 792 GB200s" in text and "days" in text and "marin's" in text


def test_marin_forecast_from_recorded_curves_then_scored_on_the_hero(tmp_path):
    root = tmp_path / "root"
    curves = reference.data_dir() / "marin_moe_535b" / "rung_curves.csv"
    proc = run_cli("import-results", MARIN, str(curves), "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "d2048: partial" in proc.stdout
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    status = {r["step"]: r for r in json.loads(run_cli("status", MARIN, "--root", str(root), "--json").stdout)["steps"]}
    assert "partial" in (status["d2048"]["note"] or "") and status["d768"]["note"] is None

    rep = json.loads(run_cli("report", MARIN, "--root", str(root), "--json").stdout)
    hero, marin = rep["hero"], rep["baselines"]["marin"]
    assert hero["lower"] < hero["predicted_final_loss"] < hero["upper"] and hero["level"] == 0.9
    assert hero["source"].startswith("rungs only") and 0.5 < hero["asymptote_E"] < 2.4
    assert marin["predicted_final_loss"] == pytest.approx(2.0387845986743045, abs=1e-4)
    assert marin["lower"] is None and marin["upper"] is None  # Marin published no interval
    for curve in (hero["curve"], marin["curve"]):
        assert curve[-1]["tokens"] == pytest.approx(18_005_144_633_344, rel=1e-6)
        assert {"tokens", "loss", "lower", "upper"} <= set(curve[0])
    assert all(p["lower"] <= p["loss"] <= p["upper"] for p in hero["curve"])
    assert [b["predict"] for b in hero["backtests"]] == ["d2048", "d1536"]
    assert hero["coverage"][0]["coverage"] is not None
    assert next(r for r in rep["rungs"] if r["name"] == "d2048")["partial"]

    predict_dir = Path(next(r["path"] for r in status.values() if r["step"] == "predict"))
    before = (predict_dir / "hero_curve.csv").read_text()
    prediction = json.loads((predict_dir / "prediction.json").read_text())
    assert prediction["baselines"]["marin"]["predicted_final_loss"] == marin["predicted_final_loss"]
    assert list(pd.read_csv(predict_dir / "baseline_marin.csv").columns) == ["step", "tokens", "frac", "loss"]

    # Only now the hero's recorded points: they must not move the rungs-only forecast.
    actual = reference.marin_hero_eval().assign(name="d6144")[["name", "step", "tokens", "loss"]]
    actual.to_csv(tmp_path / "hero.csv", index=False)
    assert run_cli("import-results", MARIN, str(tmp_path / "hero.csv"), "--root", str(root)).returncode == 0
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (predict_dir / "hero_curve.csv").read_text() == before
    rep = json.loads(run_cli("report", MARIN, "--root", str(root), "--json").stdout)
    hero, marin = rep["hero"], rep["baselines"]["marin"]
    assert hero["partial"] and hero["actual_final_loss"] is None  # 27.7% of the run is no final loss
    rec = hero["recorded"]
    assert rec["from_frac"] == 0.10 and rec["to_frac"] == pytest.approx(0.2767, abs=1e-3)
    assert rec["mean_abs_rel_error"] < marin["recorded"]["mean_abs_rel_error"]
    assert rec["inside_band"] == 1.0
    snaps = hero["snapshots"]
    assert len(snaps) >= 5 and snaps[-1]["at_frac"] == pytest.approx(rec["to_frac"])
    assert all(s["lower"] < s["predicted_final"] < s["upper"] for s in snaps)
    assert all("later_mean_abs_rel_error" in s for s in snaps[:-1])
    # the text report's last line: no final to score yet, the recorded points against the band so far
    line = run_cli("report", MARIN, "--root", str(root)).stdout.splitlines()[-1]
    assert line.startswith(f"hero: recorded to {rec['to_frac']:.1%} of its run, no final yet; forecast "), line
    assert f"its recorded points {rec['inside_band']:.0%} inside it" in line and line.endswith("report.html")


def test_finals_still_import_and_predict(tmp_path):
    from ladder.spec import load_spec

    spec = load_spec(MARIN)
    rows = [{"name": r.name, "loss": hoffmann(r.model.params_active, r.tokens), "tokens": r.tokens} for r in spec.rungs]
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    root = tmp_path / "root"
    assert run_cli("import-results", MARIN, str(tmp_path / "results.csv"), "--root", str(root)).returncode == 0
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled", "--set", "fit.bootstrap=20")
    assert proc.returncode == 0, proc.stderr[-2000:]  # the gate of a hero trained elsewhere only advises
    rep = json.loads(run_cli("report", MARIN, "--root", str(root), "--json", "--set", "fit.bootstrap=20").stdout)
    truth = hoffmann(spec.hero.model.params_active, spec.hero.tokens)
    assert rep["hero"]["predicted_final_loss"] == pytest.approx(truth, rel=0.03)
    assert rep["hero"]["actual_final_loss"] is None and "curve" not in rep["hero"]


@pytest.mark.parametrize("content,needle", [
    ("name,loss\nd9999,2.0\n", "is not a run of marin_moe_535b"),
    ("name,tokens\nd768,100\n", "missing column 'loss'"),
    ("name,loss\nd768,-1\n", "loss must be a positive number"),
    ("rung,step,loss\nd768,10,3.0\nd768,10,2.9\n", "has step 10 twice"),
    ("rung,step,loss\nd768,10,3.0\nd768,,2.9\n", "step is empty"),
    ("rung,step,loss\nd768,-5,3.0\n", "step must be a non-negative number"),
    ("name,loss\nd768,3.0\nd768,2.9\n", "several final losses"),
])
def test_bad_results_csv(tmp_path, content, needle):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    proc = run_cli("import-results", MARIN, str(bad), "--root", str(tmp_path / "root"))
    assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "root").exists()


# --from-wandb ENTITY/PROJECT. There is no network here, so: the failures a user meets offline, through the
# real CLI and the real wandb client, and the mapping on real wandb.apis.public.Run objects, built offline
# from the attributes the W&B server sends (GraphQL's: config values under "value", JSON strings).
SMOKE = str(REPO / "experiments" / "smoke.py")


def _no_wandb_home(tmp_path) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    return {**env, "HOME": str(home), "NETRC": str(home / ".netrc")}


@contextmanager
def _closed_port():
    """A local port that refuses connections for as long as the block runs.

    Bound but never listening, so a connect gets a reset, and held, so no other process (the other
    test worker's Ray starts many) can take it: a port freed before the command ran was once taken by
    one, and wandb waited on it past the subprocess's two minutes.
    """
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_from_wandb_without_a_login_says_so_in_one_line(tmp_path):
    env = _no_wandb_home(tmp_path)
    proc = subprocess.run([LADDER, "import-results", SMOKE, "--from-wandb", "ent/proj", "--root", str(tmp_path / "root")],
                          capture_output=True, text=True, timeout=HANG_S, env=env)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "no W&B API key" in proc.stderr and "wandb login" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "root").exists() and list((tmp_path / "home").iterdir()) == []


@pytest.mark.parametrize("attempt", range(3))
def test_from_wandb_with_an_unreachable_server_fails_in_one_line_and_bounded_time(tmp_path, attempt):
    # A key, but the server (WANDB_BASE_URL) a closed local port: wandb.Api must give up after --timeout,
    # not retry for minutes (subprocess's timeout is the bound), and leave nothing behind. Three attempts:
    # wandb-core then sometimes never exits, and wandb.teardown() waited on it for ever (5 of 8 in a row,
    # then 1 of 12, measured), so one attempt alone often missed that hang.
    with _closed_port() as port:
        env = {**_no_wandb_home(tmp_path), "WANDB_API_KEY": "x" * 40, "WANDB_BASE_URL": f"http://127.0.0.1:{port}"}
        for k in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
            env.pop(k, None)  # so the import's own scratch folders are what keeps W&B's files out of home
        proc = subprocess.run([LADDER, "import-results", SMOKE, "--from-wandb", "ent/proj", "--root", str(tmp_path / "root"),
                               "--timeout", "3", "--json"], capture_output=True, text=True, timeout=90, env=env)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "W&B API failed" in proc.stderr and "WANDB_BASE_URL" in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "root").exists() and list((tmp_path / "home").iterdir()) == []


@pytest.mark.parametrize("args", [[], ["results.csv", "--from-wandb", "e/p"], ["--from-wandb", "not-a-project"],
                                  ["results.csv", "--curves"]])
def test_from_wandb_bad_arguments(tmp_path, args):
    proc = subprocess.run([LADDER, "import-results", SMOKE, *args, "--root", str(tmp_path / "root")],
                          capture_output=True, text=True, timeout=HANG_S, env=_no_wandb_home(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "root").exists()


def _run(run_id: str, display: str, config: dict, summary: dict):
    from wandb.apis.public import Run

    attrs = {"name": run_id, "displayName": display, "state": "finished",
             "config": json.dumps({k: {"value": v, "desc": None} for k, v in config.items()}),
             "summaryMetrics": json.dumps(summary)}
    return Run(None, "ent", "proj", run_id, attrs=attrs, lazy=False)


def test_wandb_runs_map_to_rows_the_import_accepts(tmp_path, monkeypatch):
    from ladder.imports import results as imported
    from ladder.imports.wandb_project import rows_from_runs
    from ladder.spec import load_spec

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))  # a Run object makes a folder there
    spec = dataclasses.replace(load_spec(SMOKE), root=str(tmp_path / "root"))
    ours = _run("a1", "rung_1", {"run": {"name": "rung_1"}},  # as ladder.wandb.log logs a rung
                {"final_eval_loss": 3.2, "tokens": 1.0e6, "flops": 2.0e12, "params_active": 1.5e5, "train/loss": 3.0})
    older = _run("a0", "rung_1", {"run": {"name": "rung_1"}}, {"final_eval_loss": 9.9})  # a crashed attempt
    trained = _run("b1", "rung_2-try", {"rung": {"name": "rung_2"}}, {"eval/loss": 3.0})  # a training step's config
    byname = _run("c1", "rung_3", {}, {"eval/lm_loss": 2.9, "throughput/total_tokens": 4.0e6})  # Marin-like
    stray = _run("d1", "sweep_7", {}, {"final_eval_loss": 1.0})
    noloss = _run("e1", "rung_4", {}, {"train/loss": 2.5})
    pairs = [(r, []) for r in (ours, older, trained, byname, stray, noloss)]
    frame, skipped = rows_from_runs(pairs, [r.name for r in spec.all_runs()])
    assert frame.fillna(-1).to_dict("records") == [  # -1: not recorded
        {"name": "rung_1", "loss": 3.2, "tokens": 1.0e6, "params": 1.5e5, "flops": 2.0e12},
        {"name": "rung_2", "loss": 3.0, "tokens": -1, "params": -1, "flops": -1},
        {"name": "rung_3", "loss": 2.9, "tokens": 4.0e6, "params": -1, "flops": -1},
    ]
    assert [s.split(":")[0] for s in skipped] == ["a0", "d1", "e1 (rung_4)"] and "--metric" in skipped[-1]
    checked = imported.check_results(frame, "--from-wandb ent/proj", spec)
    imported.write(spec, checked)
    result, evals = imported.result_for(spec.rung("rung_1"), imported.records(spec)["rung_1"])
    assert evals is None and result["final_eval_loss"] == 3.2 and result["params_active"] == 1.5e5

    # --metric picks another key; a run without it is skipped, and with none left the import is one error
    frame, _ = rows_from_runs(pairs, ["rung_1", "rung_4"], metric="train/loss")
    assert frame[["name", "loss"]].to_dict("records") == [{"name": "rung_1", "loss": 3.0}, {"name": "rung_4", "loss": 2.5}]
    with pytest.raises(InputError, match="no run of 1 spec runs"):
        rows_from_runs(pairs, ["hero"])


def test_wandb_history_maps_to_a_curve(tmp_path, monkeypatch):
    from ladder.imports import results as imported
    from ladder.imports.wandb_project import rows_from_runs
    from ladder.spec import load_spec

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    spec = dataclasses.replace(load_spec(SMOKE), root=str(tmp_path / "root"))
    run = _run("a1", "rung_2", {"run": {"name": "rung_2"}}, {"eval_loss": 3.1, "tokens": 9e6})
    # rows as run.scan_history yields them (merged per key on _step): a train-only row has no eval loss
    history = [{"_step": 0, "eval_loss": 6.0, "tokens": 0}, {"_step": 50, "tokens": 4e6},
               {"_step": 100, "eval_loss": 3.5, "tokens": 8e6}, {"_step": 114, "eval_loss": 3.1, "tokens": 9.1e6}]
    frame, skipped = rows_from_runs([(run, history)], [r.name for r in spec.all_runs()], curves=True)
    assert skipped == [] and frame["step"].tolist() == [0, 100, 114] and frame["loss"].tolist() == [6.0, 3.5, 3.1]
    checked = imported.check_results(frame, "--from-wandb ent/proj", spec)
    imported.write(spec, checked)
    result, evals = imported.result_for(spec.rung("rung_2"), imported.records(spec)["rung_2"])
    assert not result["partial"] and evals["eval_loss"].tolist() == [6.0, 3.5, 3.1]
    assert evals["tokens"].tolist() == [0, 8e6, 9.1e6]


def test_import_wandb_carries_task_metrics_with_or_without_keys():
    """A W&B history's task columns are imported under their own names beside the loss, also when --keys or
    --metric name the loss alone."""
    from ladder.imports.wandb_run import normalize

    records = [{"_step": 10, "eval/loss": 2.5, "train/loss": 2.6, "task_acc/cloze": 0.3, "task_bpb/cloze": 2.1,
                "eval/downstream_bpb/mmlu_stem_test_rc_5shot_bpb": 1.4, "lr": 1e-3},
               {"_step": 20, "eval/loss": 2.4, "train/loss": 2.5, "task_acc/cloze": 0.35, "lr": 1e-3}]
    for keys in ([], [("eval/loss", "loss")]):
        rows = normalize(records, keys, "test")
        assert rows[0]["task_acc/cloze"] == 0.3 and rows[1]["task_acc/cloze"] == 0.35
        assert rows[0]["task_bpb/cloze"] == 2.1 and "task_bpb/cloze" not in rows[1]
        assert rows[0]["eval/downstream_bpb/mmlu_stem_test_rc_5shot_bpb"] == 1.4
        assert "lr" not in rows[0]
