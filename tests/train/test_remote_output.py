"""The trainer writing to an fsspec URL on a real S3-compatible server (moto, loopback): outputs land in
the bucket, a SIGKILLed run resumes from the bucket bit-identically, a corrupt newest checkpoint
in the bucket is skipped for the previous one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import fsspec
import pytest
from patience import HANG_S

from ladder.spec import to_dict
from ladder.trainers.builtin import train
from ladder.trainers.builtin.metrics import read_jsonl
from ladder.trainers.builtin.mirror import COMPLETE_MARKER, OutputDir

STEPS = 24


@pytest.fixture(scope="module")
def rung():
    from conftest import DENSE, resumable_rung

    return resumable_rung(DENSE, STEPS)


@pytest.fixture(scope="module")
def reference(rung, data_spec, tmp_path_factory):
    out = tmp_path_factory.mktemp("local-reference")
    train(rung, data_spec, out)
    return [r["loss"] for r in read_jsonl(out / "metrics.jsonl")]


def _losses(fs, url: str) -> list[float]:
    lines = fs.cat_file(f"{url}/metrics.jsonl").decode().splitlines()
    return [json.loads(line)["loss"] for line in lines if line.strip()]


def _checkpoint_steps(fs, url: str) -> list[int]:
    fs.invalidate_cache()
    return sorted(int(p.rsplit("/", 2)[-2]) for p in fs.glob(f"{url}/checkpoints/*/{COMPLETE_MARKER}"))


CHILD = """
import sys, time, json
from ladder.spec import rung_from_dict, data_from_dict
from ladder.trainers.builtin import train
cfg = json.loads(open(sys.argv[1]).read())
train(rung_from_dict(cfg["rung"]), data_from_dict(cfg["data"]), sys.argv[2],
      progress=lambda p: (print("STEP", p["step"], flush=True), time.sleep(0.2)))
"""


@pytest.mark.slow
def test_sigkill_then_resume_from_the_bucket_is_bit_identical(rung, data_spec, reference, s3_bucket, tmp_path,
                                                               capfd):
    fs = fsspec.filesystem("s3")
    url = f"{s3_bucket}/ladder/rung-abc"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"rung": to_dict(rung), "data": to_dict(data_spec)}))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LADDER_SCRATCH": str(scratch)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(cfg), url], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    killed_at = None
    for line in proc.stdout:
        if line.startswith("STEP") and int(line.split()[1]) >= 14:
            killed_at = int(line.split()[1])
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=HANG_S)
    assert killed_at is not None, "the child never reached step 14"
    in_bucket = _checkpoint_steps(fs, url)
    assert in_bucket and max(in_bucket) >= 12 and max(in_bucket) <= killed_at, in_bucket
    assert not fs.exists(f"{url}/result.json")

    capfd.readouterr()
    result = train(rung, data_spec, url)
    assert f"resumed from step {max(in_bucket)}" in capfd.readouterr().out
    assert result["status"] == "SUCCESS" and result["complete"] and result["steps"] == STEPS
    # everything a local run leaves is in the bucket, and the losses are the uninterrupted run's to the bit
    fs.invalidate_cache()
    for name in ("result.json", "metrics.jsonl", "eval.jsonl", "events.jsonl", "branches.jsonl",
                 "branches/branch-0.5.jsonl", "train_config.json"):
        assert fs.exists(f"{url}/{name}"), name
    assert json.loads(fs.cat_file(f"{url}/result.json"))["final_eval_loss"] == result["final_eval_loss"]
    assert _losses(fs, url) == reference
    assert _checkpoint_steps(fs, url) == [16, 20, 24]  # orbax's max_to_keep=3, pruned in the bucket too

    # finished: a second call reads result.json from the bucket and trains nothing
    assert train(rung, data_spec, url) == json.loads(fs.cat_file(f"{url}/result.json"))


@pytest.mark.slow
def test_corrupt_newest_checkpoint_in_the_bucket_falls_back(rung, data_spec, reference, s3_bucket, capfd):
    fs = fsspec.filesystem("s3")
    url = f"{s3_bucket}/ladder/rung-def"
    first = train(rung, data_spec, url, max_steps=12)
    assert first["steps"] == 12 and not first["complete"]
    assert _checkpoint_steps(fs, url) == [4, 8, 12]
    fs.pipe_file(f"{url}/step.json", b"{}")  # the executor's file: never pulled, so never pushed back
    with OutputDir(url) as mirror:  # a sound newest checkpoint is the only one downloaded
        assert sorted(p.name for p in (mirror.local / "checkpoints").iterdir()) == ["12"]
        assert (mirror.local / "metrics.jsonl").exists() and not (mirror.local / "step.json").exists()
    damaged = 0
    for path in fs.find(f"{url}/checkpoints/12"):
        if "/d/" in path and fs.size(path) > 0:  # truncate the array data, as a torn copy would
            data = fs.cat_file(path)
            fs.pipe_file(path, data[: len(data) // 2])
            damaged += 1
    assert damaged

    result = train(rung, data_spec, url, max_steps=20)
    err = capfd.readouterr().err
    assert f"checkpoint {url}/checkpoints/12 is corrupt" in err and "falling back" in err
    assert result["steps"] == 20
    assert _losses(fs, url) == reference[:20]
    fs.invalidate_cache()
    assert fs.exists(f"{url}/checkpoints.corrupt/12")  # kept for inspection, out of the restore path
    assert _checkpoint_steps(fs, url) == [12, 16, 20]
