"""examples/torch_gpt, the PyTorch trainer of the contract, run as the ladder runs it: a child process given the
contract's input JSON. A run stopped by SIGTERM and started again reproduces the uninterrupted run's rows; a
2-process gang over gloo, started with torch.distributed's own variables (what the ladder's gang sets, no
launcher), trains like one process at the same global batch; a model the script does not implement is one line,
exit 2.

Tiny runs (d16, 30 steps of 8 x 64 tokens, Python's pydoc topics as the only domain): seconds each.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from patience import HANG_S, wait_for

pytest.importorskip("torch")

from ladder.outputs.layout import iter_jsonl  # noqa: E402
from ladder.spec import DataSpec, DomainSpec, resolve_rung  # noqa: E402
from ladder.trainers.contract import run_input  # noqa: E402
from ladder.trainers.writer import read_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "torch_gpt" / "train.py"
DATA = DataSpec(domains=(DomainSpec("doc", "builtin:pydoc_topics", 1.0),), eval_tokens=1024, final_eval_tokens=2048)


def _run_json(tmp: Path, name: str, **rung_changes) -> Path:
    sys.path.insert(0, str(REPO))
    from experiments.smoke import RECIPE

    rung = RECIPE.rung(name, 16, tokens=30 * 8 * 64, log_every=2, n_evals=3, n_checkpoints=3)
    rung = resolve_rung(replace(rung, batch_size=8, **rung_changes), 0)
    out = tmp / name
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(run_input(rung, DATA, out, role="rung", ladder="t", resume=True)))
    return path


def _env(**extra) -> dict:
    # one thread a process: the same kernels in every run, so a resumed run can match to the bit
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


def _start(config: Path, log: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SCRIPT), "--config", str(config)], env=_env(**env),
                            stdout=log.open("w"), stderr=subprocess.STDOUT)


def _rows(out: Path, name: str) -> list[dict]:
    return list(iter_jsonl(out / name))  # a row being written is skipped, not misread


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("whole")
    config = _run_json(tmp, "r")
    proc = _start(config, tmp / "log")
    assert proc.wait(timeout=HANG_S) == 0, (tmp / "log").read_text()[-3000:]
    return tmp / "r"


def test_a_run_writes_the_contracts_rows_and_its_final_eval(uninterrupted):
    metrics, evals = _rows(uninterrupted, "metrics.jsonl"), _rows(uninterrupted, "eval.jsonl")
    assert [r["step"] for r in metrics] == list(range(2, 31, 2))
    assert [r["step"] for r in evals] == [10, 20, 30]
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] < 5.6  # it learns (ln 256 = 5.55 is a uniform guess)
    final = json.loads((uninterrupted / "final_eval.json").read_text())
    assert final["step"] == 30 and final["eval_loss"] == pytest.approx(evals[-1]["eval_loss"], rel=0.1)
    assert metrics[-1]["tokens"] == 30 * 8 * 64 and metrics[-1]["flops"] > 0 and metrics[-1]["lr"] == 0.0


def test_sigterm_checkpoints_and_the_restart_reproduces_the_uninterrupted_rows(uninterrupted, tmp_path):
    config = _run_json(tmp_path, "r")
    out = tmp_path / "r"
    proc = _start(config, tmp_path / "log1")
    # The signal goes at the first logged row, polled often: a d16 step takes milliseconds, so a later row or a
    # slower poll lets an idle machine finish all 30 steps before the signal lands (seen once in the suite).
    wait_for(lambda: _rows(out, "metrics.jsonl"), "the first row", proc=proc, log=tmp_path / "log1", every=0.005)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=HANG_S) == -signal.SIGTERM  # it ends by the signal, as it was asked
    stopped_at = max(int(p.stem.split("-")[1]) for p in (out / "checkpoints").glob("step-*.pt"))
    assert 2 <= stopped_at < 30 and not (out / "final_eval.json").exists()
    assert max(r["step"] for r in _rows(out, "metrics.jsonl")) - stopped_at < 2  # lost less than one log interval
    proc = _start(config, tmp_path / "log2")
    assert proc.wait(timeout=HANG_S) == 0, (tmp_path / "log2").read_text()[-3000:]
    for name in ("metrics.jsonl", "eval.jsonl"):
        whole, resumed = _rows(uninterrupted, name), _rows(out, name)
        assert [r["step"] for r in resumed] == [r["step"] for r in whole]
        keys = ("loss", "loss_mean", "grad_norm", "param_norm") if name == "metrics.jsonl" else ("eval_loss", "bpb")
        for a, b in zip(whole, resumed, strict=True):
            assert {k: a[k] for k in keys} == {k: b[k] for k in keys}, f"{name} step {a['step']}"
    assert json.loads((out / "final_eval.json").read_text())["eval_loss"] == \
        json.loads((uninterrupted / "final_eval.json").read_text())["eval_loss"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_two_process_gloo_gang_trains_like_one_process_at_the_same_global_batch(uninterrupted, tmp_path):
    config = _run_json(tmp_path, "r")
    port = str(_free_port())
    procs = [_start(config, tmp_path / f"log{rank}", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                    LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port) for rank in range(2)]
    for rank, proc in enumerate(procs):
        assert proc.wait(timeout=HANG_S) == 0, (tmp_path / f"log{rank}").read_text()[-3000:]
    one, two = _rows(uninterrupted, "metrics.jsonl"), _rows(tmp_path / "r", "metrics.jsonl")
    assert [r["step"] for r in two] == [r["step"] for r in one]
    # Each process holds half of every batch and DDP averages the gradients: the same step up to float
    # summation order. Measured (2 cores, torch 2.13 CPU): the largest relative difference of a logged loss over
    # the 30 steps was 1.1e-7; the bound is about 100 times that.
    worst = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one, two, strict=True))
    assert worst < 1e-5, worst
    ev1, ev2 = _rows(uninterrupted, "eval.jsonl")[-1], _rows(tmp_path / "r", "eval.jsonl")[-1]
    assert ev2["eval_loss"] == pytest.approx(ev1["eval_loss"], rel=1e-5)


def test_a_model_the_script_does_not_implement_is_one_line_and_exit_2(tmp_path):
    from ladder.spec import ModelSpec

    config = _run_json(tmp_path, "q", model=ModelSpec(d_model=16, n_layers=2, n_heads=2, qk_norm=True))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--config", str(config)], env=_env(), capture_output=True,
                          text=True, timeout=HANG_S)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "model.qk_norm" in proc.stderr and "Traceback" not in proc.stderr
    assert read_run(config)["model"]["qk_norm"] is True
