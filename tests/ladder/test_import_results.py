"""Marin's 535B ladder through the real CLI with no training: planned and priced, its recorded rung
curves imported, the hero forecast from them (ours and Marin's baseline), and only then the
hero's recorded points imported and scored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fits import reference

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
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


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
