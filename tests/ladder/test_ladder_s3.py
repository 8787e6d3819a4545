"""The smoke ladder with its root in a bucket of a real S3-compatible server (moto on loopback), on real
local Ray: every step's files go through fsspec/s3fs, in the driver and in the Ray workers alike.

Its first three rungs are the session's shared smoke ladder's (tests/shared_ladders.py), uploaded into the
bucket as finished steps: the same configs give the same hashes, so the executor reads their statuses from
the bucket and runs them not again (content addressing through S3). rung_4 and the hero train here, in Ray
workers, through the bucket; fit, predict, gate and report read every rung from it. (Training all four rungs
again here was the shared ladder's work done twice.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fsspec
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
SMOKE = str(REPO / "experiments" / "smoke.py")
# A shorter hero and a smaller bootstrap than the smoke ladder's: the point is where the files go, and the
# smoke ladder's own quality is tested on local disk (test_ladder_e2e.py). Neither changes a rung's hash
# (the data's would: the shared rungs would not be found).
LIGHTER = ["--set", "hero.tokens=300000", "--set", "fit.bootstrap=20"]
STEPS = {"rung_1", "rung_2", "rung_3", "rung_4", "fit", "predict", "gate", "hero", "report"}
SHARED = ("rung_1", "rung_2", "rung_3")  # uploaded from the shared ladder; rung_4 and the hero train here


def run_cli(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


def _shared_rungs(smoke_root: str) -> dict[str, tuple[Path, str]]:
    """name -> (folder, run id) of the shared ladder's finished rungs in SHARED."""
    out = {}
    for d in Path(smoke_root, "smoke").glob("rung_*-*"):
        name = d.name.rsplit("-", 1)[0]
        status = json.loads((d / ".status").read_text()) if (d / ".status").exists() else {}
        if name in SHARED and status.get("status") == "SUCCESS":
            out[name] = (d, status["run_id"])
    return out


@pytest.mark.slow
def test_smoke_ladder_with_its_root_in_s3(s3_bucket, ladder_smoke_root):
    root = f"{s3_bucket}/ladders"
    shared = _shared_rungs(ladder_smoke_root)
    assert set(shared) == set(SHARED), shared
    fs = fsspec.filesystem("s3")
    for d, _ in shared.values():
        fs.put(f"{d}/", f"{root}/smoke/{d.name}/", recursive=True)  # the folder's files, dot-files included
    t0 = time.perf_counter()
    proc = run_cli("submit", SMOKE, "--root", root, "--no-progress", "--wandb", "offline", *LIGHTER)
    submit_s = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ladder complete" in proc.stdout

    status = run_cli("status", SMOKE, "--root", root, "--json", *LIGHTER)
    assert status.returncode == 0, status.stderr
    rows = {r["step"]: r for r in json.loads(status.stdout)["steps"]}
    assert set(rows) == STEPS
    assert {r["status"] for r in rows.values()} == {"SUCCESS"}, {k: r["status"] for k, r in rows.items()}

    fs.invalidate_cache()
    dirs = {name: r["path"] for name, r in rows.items()}
    assert all(d.startswith(root + "/smoke/") for d in dirs.values()), dirs
    for name, (d, run_id) in shared.items():  # found in the bucket as finished: not run again
        assert dirs[name] == f"{root}/smoke/{d.name}", (name, dirs[name])
        assert json.loads(fs.cat_file(f"{dirs[name]}/.status"))["run_id"] == run_id, name
    for name in ("rung_1", "rung_2", "rung_3", "rung_4", "hero"):
        d = dirs[name]
        result = json.loads(fs.cat_file(f"{d}/result.json"))
        assert result["status"] == "SUCCESS" and result["complete"] and result["final_eval_loss"] > 0
        for f in ("metrics.jsonl", "eval.jsonl", "branches.jsonl", "train_config.json"):
            assert fs.exists(f"{d}/{f}"), (name, f)
        rows_logged = fs.cat_file(f"{d}/metrics.jsonl").decode().splitlines()
        assert json.loads(rows_logged[-1])["step"] == result["steps"]
        if name not in SHARED:  # trained here: each checkpoint uploaded whole, then its marker
            assert fs.glob(f"{d}/checkpoints/*/LADDER_UPLOAD_COMPLETE"), name
    assert fs.exists(f"{dirs['hero']}/forecasts.jsonl")  # the hero's callback wrote beside the mirror
    assert json.loads(fs.cat_file(f"{dirs['fit']}/fit.json"))["backtest"]["predict"] == "rung_4"
    for f in ("prediction.json", "hero_curve.csv"):
        assert fs.exists(f"{dirs['predict']}/{f}"), f
    assert fs.exists(f"{dirs['gate']}/gate.json")
    for f in ("report.json", "report.html", "result.json"):
        assert fs.exists(f"{dirs['report']}/{f}"), f
    report = json.loads(fs.cat_file(f"{dirs['report']}/report.json"))
    assert report["hero"]["actual_final_loss"] > 0

    # `ladder report` rebuilds the report from the bucket and names the uploaded page
    rep = run_cli("report", SMOKE, "--root", root, *LIGHTER)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert f"report: {dirs['report']}/report.html" in rep.stdout
    print(f"submit took {submit_s:.0f} s")
