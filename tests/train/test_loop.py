"""End-to-end trainer tests: real tiny models on real text, real orbax checkpoints, real SIGKILL."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from patience import HANG_S

from ladder.spec import OptimSpec, to_dict
from ladder.trainers.builtin import Diverged, train
from ladder.trainers.builtin.metrics import read_jsonl

STEPS = 32


@pytest.fixture(scope="session")
def moe_rung():
    from conftest import MOE, resumable_rung

    return resumable_rung(MOE, STEPS)


@pytest.fixture(scope="session")
def reference(moe_rung, data_spec, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    seen = {"progress": [], "steps": [], "evals": [], "ckpts": [], "end": []}

    class Recorder:
        def on_step(self, step, row):
            seen["steps"].append(step)

        def on_eval(self, step, row):
            seen["evals"].append(step)

        def on_checkpoint(self, step):
            seen["ckpts"].append(step)

        def on_end(self, result):
            seen["end"].append(result["status"])

    result = train(moe_rung, data_spec, out, callbacks=[Recorder()], progress=seen["progress"].append)
    return out, result, seen


def test_outputs_metrics_eval_result_and_branches(reference, moe_rung):
    out, result, seen = reference
    assert result["status"] == "SUCCESS" and result["complete"]
    assert result["steps"] == STEPS and result["tokens"] == STEPS * 4 * 32
    assert result["params_active"] == moe_rung.model.params_active
    assert result["flops"] == pytest.approx(STEPS * 4 * 32 * moe_rung.model.flops_per_token(32))
    assert json.loads((out / "result.json").read_text()) == json.loads(json.dumps(result, default=float))
    m = pd.read_json(out / "metrics.jsonl", lines=True)
    assert list(m["step"]) == list(range(1, STEPS + 1))
    for col in ("tokens", "loss", "lr", "grad_norm", "param_norm", "update_norm", "router_bias_norm_l0",
                "router_bias_norm_l1", "expert_load_max_over_mean", "drop_rate", "routing_entropy",
                "tokens_per_s", "mfu", "flops", "wall_s"):
        assert col in m.columns, col
    assert m["loss"].iloc[-4:].mean() < m["loss"].iloc[:4].mean() - 0.5  # it learns
    assert (m["router_bias_norm_l0"] > 0).all()
    e = pd.read_json(out / "eval.jsonl", lines=True)
    assert list(e["step"]) == [8, 16, 24, 32]
    for col in ("eval_loss", "eval_loss/prose", "eval_loss/docs", "bpb/prose", "bpb/docs", "bpb", "flops"):
        assert col in e.columns
    assert result["final_eval_loss"] == pytest.approx(e["eval_loss"].iloc[-1])
    assert set(result["final_eval_loss_by_domain"]) == {"prose", "docs"}
    # one cooldown branch at half the budget: 16 steps, leaving the stable phase at step 12
    (br,) = result["branches"]
    assert br["frac"] == 0.5 and br["steps"] == 16 and br["start"] == 12 and br["status"] == "SUCCESS"
    assert [c[0] for c in br["curve"]] == list(range(13, 17)) and br["curve"][-1][1] == 0.0
    assert len(read_jsonl(out / "branches" / "branch-0.5.jsonl")) == 4
    # the branch did not disturb the main run: its lr at step 13..16 is still the peak
    assert m.loc[m["step"].between(13, 16), "lr"].tolist() == pytest.approx([moe_rung.lr] * 4)
    assert seen["steps"] == list(range(1, STEPS + 1)) and seen["evals"] == [8, 16, 24, 32]
    assert seen["ckpts"] == [4, 8, 12, 16, 20, 24, 28, 32] and seen["end"] == ["SUCCESS"]
    assert seen["progress"][-1]["step"] == STEPS and seen["progress"][-1]["total_steps"] == STEPS
    assert {"tokens", "loss", "tokens_per_s", "eta_s"} <= set(seen["progress"][-1])
    # No rate from the first chunk, whose time is mostly its compile; from the next on, the mean so far.
    first_chunk = min(seen["ckpts"])  # chunks end at every boundary; checkpoints here are the first ones
    rates = {p["step"]: (p["tokens_per_s"], p["eta_s"]) for p in seen["progress"]}
    assert min(rates) <= first_chunk and all(rates[s] == (None, None) for s in rates if s <= first_chunk), rates
    assert all(r > 0 and eta >= 0 for s, (r, eta) in rates.items() if s > first_chunk), rates
    # a finished run is not retrained
    again = train(moe_rung, to_dict(data_spec_of(out)), out)
    assert again == json.loads((out / "result.json").read_text())


def data_spec_of(out: Path):
    from ladder.spec import data_from_dict

    return data_from_dict(json.loads((out / "train_config.json").read_text())["data"])


CHILD = """
import sys, time, json
from ladder.spec import rung_from_dict, data_from_dict
from ladder.trainers.builtin import train
cfg = json.loads(open(sys.argv[1]).read())
train(rung_from_dict(cfg["rung"]), data_from_dict(cfg["data"]), sys.argv[2],
      progress=lambda p: (print("STEP", p["step"], flush=True), time.sleep(0.15)))
"""


def _start_child(rung, data_spec, tmp_path):
    """The rung training in a child process that prints each step (so a test can kill it mid-run)."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"rung": to_dict(rung), "data": to_dict(data_spec)}))
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(cfg), str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc, out


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical(reference, moe_rung, data_spec, tmp_path):
    ref_out, _, _ = reference
    proc, out = _start_child(moe_rung, data_spec, tmp_path)
    killed_at = None
    for line in proc.stdout:
        if line.startswith("STEP") and int(line.split()[1]) >= 19:
            killed_at = int(line.split()[1])
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=HANG_S)
    assert killed_at is not None and proc.returncode == -signal.SIGKILL
    assert not (out / "result.json").exists()
    rows_before = read_jsonl(out / "metrics.jsonl")
    assert rows_before[-1]["step"] >= 19  # metrics past the last checkpoint (step 16) get truncated

    result = train(moe_rung, data_spec, out)
    assert result["status"] == "SUCCESS"
    got = pd.read_json(out / "metrics.jsonl", lines=True)
    ref = pd.read_json(ref_out / "metrics.jsonl", lines=True)
    assert list(got["step"]) == list(range(1, STEPS + 1))
    for col in ("loss", "grad_norm", "param_norm", "router_bias_norm_l1", "drop_rate"):
        assert got[col].tolist() == ref[col].tolist(), col  # bit for bit
    ref_eval = pd.read_json(ref_out / "eval.jsonl", lines=True)
    assert pd.read_json(out / "eval.jsonl", lines=True)["eval_loss"].tolist() == ref_eval["eval_loss"].tolist()
    assert result["branches"][0]["curve"] == json.loads((ref_out / "result.json").read_text())["branches"][0]["curve"]


def test_corrupt_newest_checkpoint_falls_back(reference, moe_rung, data_spec, tmp_path, capfd):
    ref_out, _, _ = reference
    out = tmp_path / "run"
    first = train(moe_rung, data_spec, out, max_steps=12)
    assert first["status"] == "SUCCESS" and not first["complete"] and first["steps"] == 12
    newest = out / "checkpoints" / "12"
    assert newest.is_dir()
    for f in newest.rglob("*"):
        if f.is_file() and f.stat().st_size > 0 and "d" in f.parent.name:
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # truncate the array data
    result = train(moe_rung, data_spec, out, max_steps=20)
    err = capfd.readouterr().err
    assert "checkpoints/12 is corrupt" in err and "falling back" in err
    assert result["steps"] == 20
    got = pd.read_json(out / "metrics.jsonl", lines=True)
    ref = pd.read_json(ref_out / "metrics.jsonl", lines=True)
    assert list(got["step"]) == list(range(1, 21))
    assert got["loss"].tolist() == ref["loss"].iloc[:20].tolist()


def test_divergence_ends_failed_with_a_clear_result(data_spec, tmp_path, rung_factory):
    rung = rung_factory(steps=20, optim=OptimSpec(lr=1e6, grad_clip=0.0), checkpoint_every=5)
    result = train(rung, data_spec, tmp_path / "nan")
    assert result["status"] == "FAILED"
    assert 1 <= result["failed_step"] <= 20
    assert "non-finite" in result["message"] and f"step {result['failed_step']}" in result["message"]
    on_disk = json.loads((tmp_path / "nan" / "result.json").read_text())
    assert on_disk["status"] == "FAILED" and on_disk["failed_step"] == result["failed_step"]
    events = read_jsonl(tmp_path / "nan" / "events.jsonl")
    assert events[-1]["event"] == "divergence" and events[-1]["step"] == result["failed_step"]
    rows = read_jsonl(tmp_path / "nan" / "metrics.jsonl")
    assert all(r["step"] < result["failed_step"] for r in rows)
    if result["failed_step"] > 1:
        assert result["last_finite_metrics"]["step"] == result["failed_step"] - 1
    with pytest.raises(Diverged, match="non-finite"):
        train(rung, data_spec, tmp_path / "nan2", raise_on_divergence=True)


@pytest.mark.slow
def test_sigterm_checkpoints_then_exits(reference, moe_rung, data_spec, tmp_path):
    ref_out, _, _ = reference
    proc, out = _start_child(moe_rung, data_spec, tmp_path)
    for line in proc.stdout:
        if line.startswith("STEP") and int(line.split()[1]) >= 5:
            os.kill(proc.pid, signal.SIGTERM)
            break
    proc.wait(timeout=HANG_S)
    assert proc.returncode == -signal.SIGTERM
    steps = sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    last = read_jsonl(out / "metrics.jsonl")[-1]["step"]
    assert steps and steps[-1] == last  # checkpointed where it stopped (not only at multiples of 4)
    result = train(moe_rung, data_spec, out, max_steps=12)
    got = pd.read_json(out / "metrics.jsonl", lines=True)
    ref = pd.read_json(ref_out / "metrics.jsonl", lines=True)
    assert result["steps"] == 12 and list(got["step"]) == list(range(1, 13))
    # chunks are aligned to absolute steps, so resuming from a SIGTERM point is bit-identical too
    assert got["loss"].tolist() == ref["loss"].tolist()[:12]
