"""The smoke ladder end to end through the real CLI: real Ray, real JAX training, real fits.

One ladder is trained once for the module; the tests then read every artifact, rerun a rung,
resubmit, and run a second ladder whose rung diverges to see the gate block the hero.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
SMOKE = str(REPO / "experiments" / "smoke.py")

pytestmark = pytest.mark.slow


def run_cli(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


def statuses(root: Path) -> dict[str, dict]:
    out = {}
    for d in (root / "smoke").glob("*-*"):
        if (d / ".status").exists():
            out[d.name.rsplit("-", 1)[0]] = {"dir": d, **json.loads((d / ".status").read_text())}
    return out


def current(root: Path) -> dict[str, dict]:
    """Each step's current dir and status, as `ladder status --json` reports them."""
    proc = run_cli("status", SMOKE, "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["steps"]
    out = {}
    for r in rows:
        d = Path(r["path"])
        st = json.loads((d / ".status").read_text()) if (d / ".status").exists() else {}
        out[r["step"]] = {"dir": d, "status": r["status"], "run_id": st.get("run_id")}
    return out


@pytest.fixture(scope="module")
def smoke_root(ladder_smoke_root) -> Path:
    return Path(ladder_smoke_root)


def test_every_step_succeeds_and_writes_its_artifacts(smoke_root):
    steps = current(smoke_root)
    assert set(steps) == {"rung_1", "rung_2", "rung_3", "rung_4", "fit", "predict", "gate", "hero", "report"}
    assert {s["status"] for s in steps.values()} == {"SUCCESS"}
    for name in ("rung_1", "rung_2", "rung_3", "rung_4", "hero"):
        d = steps[name]["dir"]
        result = json.loads((d / "result.json").read_text())
        assert result["status"] == "SUCCESS" and result["final_eval_loss"] > 0
        metrics = pd.read_json(d / "metrics.jsonl", lines=True)
        assert {"step", "tokens", "loss", "lr", "grad_norm", "flops"} <= set(metrics.columns)
        assert metrics["step"].is_monotonic_increasing
        evals = pd.read_json(d / "eval.jsonl", lines=True)
        assert {"eval_loss", "eval_loss/code", "eval_loss/prose"} <= set(evals.columns)
        assert any((d / "checkpoints").iterdir())
        prov = json.loads((d / "step.json").read_text())
        assert prov["reason"].startswith("new") and "config" in prov
    # The 2-CPU hero's Ray worker started with one XLA host device per CPU and trained data-parallel.
    hero = json.loads((steps["hero"]["dir"] / "result.json").read_text())
    assert hero["devices"] == 2 and hero["parallel"] == "replicated"
    assert json.loads((steps["rung_1"]["dir"] / "result.json").read_text())["devices"] == 1
    # Larger rungs reach lower loss: the ladder really trained.
    finals = [json.loads((steps[f"rung_{i}"]["dir"] / "result.json").read_text())["final_eval_loss"] for i in range(1, 5)]
    assert finals == sorted(finals, reverse=True)

    fit = json.loads((steps["fit"]["dir"] / "fit.json").read_text())
    assert fit["backtest"]["ok"] and fit["backtest"]["predict"] == "rung_4"
    assert "rung_4" not in fit["backtest"]["fit_on"]
    pred = json.loads((steps["predict"]["dir"] / "prediction.json").read_text())["hero"]
    assert pred["lower"] < pred["predicted_final_loss"] < pred["upper"]
    # The law's band over compute (what the dashboard and the report draw) is the calibrated interval:
    # at the hero's compute it is the hero's interval, not the bootstrap's percentiles kept beside it.
    law = pd.read_csv(steps["fit"]["dir"] / "law_curve.csv")
    at = np.log(pred["flops"])
    for col, want in (("loss", pred["predicted_final_loss"]), ("lower", pred["lower"]), ("upper", pred["upper"])):
        assert np.interp(at, np.log(law["flops"]), law[col]) == pytest.approx(want, rel=2e-3), col
    assert {"boot_lower", "boot_upper"} <= set(law.columns)
    # The whole-curve law fitted and was backtested on the same rungs as the final-loss law.
    assert fit["curve_law"]["fit"]["law"] == "joint_multipower", fit["curve_law"]
    cbt = fit["curve_law"]["backtest"]
    assert cbt["fit_on"] == fit["backtest"]["fit_on"] and cbt["predict_runs"] == fit["backtest"]["predict_runs"]
    assert cbt["actual"] == pytest.approx(fit["backtest"]["actual"])
    assert cbt["predicted"] == pytest.approx(cbt["predicted_final_train"] * cbt["eval_over_train"])
    # The hero's curve-law eval loss is its train loss times the ratio's trend carried to the hero's compute.
    from ladder.analysis.curves import ratio_at

    ratio = ratio_at(fit["curve_law"]["eval_over_train_trend"], pred["flops"])
    assert pred["curve_law_eval_over_train"] == pytest.approx(ratio)
    assert pred["curve_law_final_eval_loss"] == pytest.approx(pred["curve_law_final_train_loss"] * ratio)
    # Where the two laws part at the hero, the interval (and the band above, checked at the hero) carries it.
    parted = abs(math.log(pred["curve_law_final_eval_loss"] / pred["predicted_final_loss"]))
    assert pred["interval"]["sigma_model"] == pytest.approx(parted, rel=1e-9) and parted > 0
    gate = json.loads((steps["gate"]["dir"] / "gate.json").read_text())
    assert any("no residual" in w for w in gate["warnings"]) == bool(fit["backtest"]["underdetermined"])
    # The backtest's seed-noise band, and the gate's word when its threshold sits inside it.
    from ladder.analysis.backtests import false_block

    noise = fit["backtest"]["noise"]
    assert noise["draws"] >= 3 and noise["sigma"] > 0 and noise["source"] in ("replicas", "prior")
    # under the "noise" rule a band measured on replicas is the bar itself, so the threshold's odds go unsaid
    measured_bar = noise["source"] == "replicas" and gate["thresholds"]["backtest_rule"] == "noise"
    inside = false_block(noise, gate["thresholds"]["max_backtest_error"]) > 0.10 and not measured_bar
    assert any("inside this backtest's seed noise" in w for w in gate["warnings"]) == inside
    curve = pd.read_csv(steps["predict"]["dir"] / "hero_curve.csv")
    assert {"step", "tokens", "loss", "lower", "upper"} <= set(curve.columns)
    assert (curve["lower"] <= curve["loss"]).all() and (curve["loss"] <= curve["upper"]).all()
    # The prediction was written before the hero started.
    hero_status = json.loads((steps["hero"]["dir"] / ".status").read_text())
    assert (steps["predict"]["dir"] / "prediction.json").stat().st_mtime < hero_status["start"]
    forecasts = pd.read_json(steps["hero"]["dir"] / "forecasts.jsonl", lines=True)
    assert len(forecasts) >= 2 and forecasts["at_step"].is_monotonic_increasing
    # The forecasts were made against this prediction (one prior per forecasts file).
    import hashlib

    prior = json.loads((steps["hero"]["dir"] / "forecast_prior.json").read_text())
    assert prior["sha256"] == hashlib.sha256((steps["predict"]["dir"] / "hero_curve.csv").read_bytes()).hexdigest()
    report_dir = steps["report"]["dir"]
    for name in ("report.json", "report.html", "hero.png", "law.png", "rung_curves.png", "curve.csv"):
        assert (report_dir / name).stat().st_size > 0, name


def test_submit_output_has_no_tracebacks(smoke_root):
    out = smoke_root / "submit.out"
    if not out.exists():
        pytest.skip("LADDER_SMOKE_ROOT reuses a ladder submitted outside this session")
    text = out.read_text()
    # wandb's service used to die before its atexit hook in recycled Ray workers: two tracebacks a run
    assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]


def test_report_json_and_table(smoke_root):
    proc = run_cli("report", SMOKE, "--root", str(smoke_root), "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    hero = rep["hero"]
    for key in ("predicted_final_loss", "lower", "upper", "actual_final_loss", "relative_error", "inside_interval"):
        assert key in hero and hero[key] is not None, key
    assert hero["relative_error"] == pytest.approx(hero["predicted_final_loss"] / hero["actual_final_loss"] - 1)
    assert rep["backtest"]["ok"] and rep["fit"]["law"]
    table = run_cli("report", SMOKE, "--root", str(smoke_root))
    assert table.returncode == 0 and "predicted final eval loss" in table.stdout and "report.html" in table.stdout
    assert "second estimate, the whole-curve law" in table.stdout
    assert hero["laws_disagreement"]["in_band"] and "from the final-loss law, in the band" in table.stdout
    second = hero["curve_law"]
    assert second["relative_error"] == pytest.approx(second["predicted_final_train_loss"] / second["actual_final_train_loss"] - 1)
    assert 0.5 < second["actual_final_train_loss"] / hero["actual_final_loss"] < 2


def test_disagreement_reported_beside_the_band_leaves_the_interval_as_without_it(smoke_root, tmp_path):
    # The smoke ladder's own fit, predicted again with fit.disagreement "report": the same centre and the
    # whole-curve law's distance still recorded, the interval without it.
    import dataclasses

    from ladder.analysis import predict_ladder
    from ladder.dag.stages import build_steps
    from ladder.spec import load_spec

    spec = load_spec(SMOKE)
    config = {s.name: s for s in build_steps(dataclasses.replace(spec, fit=dataclasses.replace(spec.fit, disagreement="report")))}
    fit_dir = current(smoke_root)["fit"]["dir"]
    predict_ladder(config["predict"].config, str(fit_dir), str(tmp_path))
    beside = json.loads((tmp_path / "prediction.json").read_text())["hero"]
    banded = json.loads((current(smoke_root)["predict"]["dir"] / "prediction.json").read_text())["hero"]
    assert beside["predicted_final_loss"] == pytest.approx(banded["predicted_final_loss"], rel=1e-12)
    gap = beside["laws_disagreement"]
    assert not gap["in_band"] and gap["log_ratio"] == pytest.approx(banded["laws_disagreement"]["log_ratio"], rel=1e-12)
    assert beside["interval"]["sigma_model"] == 0.0 < banded["interval"]["sigma_model"]
    assert banded["lower"] < beside["lower"] < beside["upper"] < banded["upper"]
    assert "not in it" in beside["interval"]["method"]


def test_resubmit_runs_nothing(smoke_root):
    before = current(smoke_root)
    proc = run_cli("submit", SMOKE, "--root", str(smoke_root), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    after = current(smoke_root)
    assert {k: v["run_id"] for k, v in after.items()} == {k: v["run_id"] for k, v in before.items()}


def test_rerun_one_rung_retrains_it_and_refreshes_the_analysis_not_the_hero(smoke_root, tmp_path):
    # On a copy of the shared ladder: other test files read it at the same time (pytest-xdist), and a
    # rerun replaces its fit, predict and report while it runs.
    root = tmp_path / "copy"
    shutil.copytree(smoke_root, root, symlinks=True)
    before = current(root)
    rung = before["rung_2"]["dir"]
    old_result = json.loads((rung / "result.json").read_text())
    old_rows = pd.read_json(rung / "metrics.jsonl", lines=True)
    started = time.time()
    proc = run_cli("rerun", SMOKE, "rung_2", "--root", str(root), "--no-progress")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    after = current(root)
    changed = {k for k in after if after[k]["run_id"] != before[k]["run_id"]}
    assert changed == {"rung_2", "fit", "predict", "gate", "report"}
    prov = json.loads((after["fit"]["dir"] / "step.json").read_text())
    assert prov["reason"].startswith("forced")
    # The rung really trained again from step 0 (it used to hand back its old result.json): every output
    # file and checkpoint is new, every row was written again, and it did not resume from a checkpoint.
    assert after["rung_2"]["dir"] == rung
    for name in ("metrics.jsonl", "eval.jsonl", "result.json", "train_config.json"):
        assert (rung / name).stat().st_mtime > started, name
    checkpoints = [p for p in (rung / "checkpoints").iterdir() if p.name.isdigit()]
    assert checkpoints and all(p.stat().st_mtime > started for p in checkpoints)
    new_result = json.loads((rung / "result.json").read_text())
    new_rows = pd.read_json(rung / "metrics.jsonl", lines=True)
    assert new_result["steps"] == old_result["steps"] and new_result["wall_s"] != old_result["wall_s"]
    assert list(new_rows["step"]) == list(old_rows["step"])
    assert (new_rows["wall_s"] != old_rows["wall_s"]).all()  # no row kept from the first run
    assert "rung_2: resumed from step" not in proc.stdout + proc.stderr
    # Same seed, same data: the retrained rung lands where the first run did (to float rounding).
    assert new_result["final_eval_loss"] == pytest.approx(old_result["final_eval_loss"], rel=1e-4)
    rung_prov = json.loads((rung / "step.json").read_text())
    assert rung_prov["reason"] == "forced" and rung_prov["previous_outputs"] is None
    assert not list((root / "smoke" / ".replaced").iterdir())  # the old outputs went once it succeeded


def test_notebook_walks_through_the_finished_ladder(smoke_root, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(REPO / "notebooks" / "ladder_walkthrough.ipynb", as_version=4)
    os.environ["LADDER_NOTEBOOK_ROOT"] = str(smoke_root)
    os.environ["LADDER_NOTEBOOK_SPEC"] = SMOKE
    try:
        NotebookClient(nb, timeout=HANG_S, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.pop("LADDER_NOTEBOOK_ROOT")
        os.environ.pop("LADDER_NOTEBOOK_SPEC")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any(o.get("output_type") == "display_data" and "image/png" in o.get("data", {}) for o in outputs)


def test_gate_blocks_a_ladder_with_a_diverged_rung(smoke_root, tmp_path):
    root = tmp_path / "diverged"
    # rung_2 at an absurd learning rate diverges; the other rungs are the smoke ladder's own. Their
    # finished directories are copied from the module's ladder: same configs, same hashes, so the
    # executor skips them (content addressing at work) and only rung_2 and the analysis run here.
    copied = {}
    for name, step in current(smoke_root).items():
        if name in ("rung_1", "rung_3", "rung_4"):
            shutil.copytree(step["dir"], root / "smoke" / step["dir"].name)
            copied[name] = step["run_id"]
    assert len(copied) == 3
    args = ["submit", SMOKE, "--root", str(root), "--no-progress", "--set", "rungs[1].optim.lr=1e6",
            "--set", "hero.tokens=60000"]
    proc = run_cli(*args)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    st = statuses(root)
    assert st["rung_2"]["status"] == "FAILED"
    assert st["gate"]["status"] == "BLOCKED"
    assert {r: st[r]["run_id"] for r in copied} == copied  # the copied rungs did not run again
    assert "hero" not in st or st["hero"]["status"] in ("BLOCKED", "DEP_FAILED")
    gate = json.loads((st["gate"]["dir"] / "gate.json").read_text())
    assert not gate["passed"] and any("rung_2" in r and "diverged" in r for r in gate["reasons"])
    assert "blocked" in proc.stdout.lower() and "rung_2" in proc.stdout
    result = json.loads((st["rung_2"]["dir"] / "result.json").read_text())
    assert result["status"] == "FAILED" and result["failed_step"] >= 1
    # The report still runs and says why the hero did not.
    assert st["report"]["status"] == "SUCCESS"
    rep = json.loads((st["report"]["dir"] / "report.json").read_text())
    assert rep["gate"]["passed"] is False
    # `ladder report`, make demo's last command, ends on what to do next, how often, and where the report is
    lines = run_cli("report", *args[1:4], *args[5:]).stdout.splitlines()
    force = shlex.join(["ladder", "submit", SMOKE, "--root", str(root), *args[5:], "--force"])
    assert lines[-3].startswith("hero: not trained, the gate BLOCKED it") and f"`{force}`" in lines[-3], lines[-3:]
    assert lines[-2].startswith("How often the gate blocks this ladder") and lines[-1].startswith("report: ")
