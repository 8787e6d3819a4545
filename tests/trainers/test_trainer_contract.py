"""The trainer contract's pieces on their own (no Ray, no trainer process): the input's schedule is the
built-in trainer's to the bit, the vendorable writer's rows and resume, the rows followed as they grow,
result.json read back from them."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ladder.outputs import layout
from ladder.spec import load_spec
from ladder.trainers import writer
from ladder.trainers.cadence import cadence
from ladder.trainers.contract import PLACEHOLDERS, placeholder_values, run_input
from ladder.trainers.follow import Follower, RowError
from ladder.trainers.outcome import NoFinalEval, result

HERE = Path(__file__).resolve().parent
SPEC = HERE / "foreign_ladder.py"


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC)


def _input(spec, out: Path, run=None) -> dict:
    return run_input(run or spec.rungs[0], spec.data, out, role="rung", ladder=spec.name, resume=False)


def test_lr_at_is_the_builtin_schedule_for_every_kind_and_shape(spec):
    from ladder.trainers.builtin.optim import lr_schedule

    run = dataclasses.replace(spec.rungs[1], tokens=256 * 333)  # an odd step count: rounding at every boundary
    for kind in ("wsd", "cosine", "linear", "constant"):
        for shape in ("1-sqrt", "linear", "cosine"):
            for floor in (0.0, 0.1):
                r = dataclasses.replace(run, schedule=dataclasses.replace(run.schedule, kind=kind, cooldown_shape=shape,
                                                                          final_lr_frac=floor))
                sched = _input(spec, Path("/x"), r)["lr_schedule"]
                ours = np.array([writer.lr_at(sched, s) for s in range(r.steps)])
                assert np.array_equal(ours, lr_schedule(r)), (kind, shape, floor)


def test_the_input_is_the_resolved_run(spec, tmp_path):
    run = spec.rungs[0]
    inp = _input(spec, tmp_path)
    assert inp["contract"] == writer.CONTRACT_VERSION
    assert (inp["steps"], inp["batch_size"], inp["seq_len"]) == (run.steps, run.batch_size, run.seq_len)
    assert inp["tokens_per_step"] == run.batch_size * run.seq_len
    assert inp["model"]["flops_per_token"] == run.model.flops_per_token(run.seq_len)
    assert inp["eval"]["steps"] == sorted(cadence(run.steps, run.eval_every, run.n_evals))
    assert inp["eval"]["final_tokens_per_domain"] == spec.data.final_tokens != inp["eval"]["tokens_per_domain"]
    assert [d["name"] for d in inp["data"]["domains"]] == ["code", "prose"]
    assert inp["checkpoint"]["dir"] == str(tmp_path / "checkpoints")
    values = placeholder_values(inp, tmp_path / "run.json")
    assert set(values) == set(PLACEHOLDERS)
    assert values["steps"] == str(run.steps) and values["d_model"] == str(run.model.d_model)
    json.dumps(inp)  # all of it JSON


def test_the_writer_imports_nothing_of_ladder_and_names_the_layout_files():
    tree = ast.parse(Path(writer.__file__).read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.split(".")[0] == "ladder" for m in modules), modules
    assert (writer.METRICS, writer.EVAL, writer.EVENTS, writer.FINAL_EVAL) == (
        layout.METRICS, layout.EVAL, layout.EVENTS, layout.FINAL_EVAL)


def test_the_writer_resumes_without_the_rows_past_its_checkpoint(spec, tmp_path):
    inp = _input(spec, tmp_path)
    with writer.RunWriter(inp) as w:
        for step in range(5, 31, 5):
            w.metrics(step, 5.0 - step / 10)
        w.eval(20, 4.0, **{"eval_loss/code": 4.1})
        w.metrics(35, float("nan"))
    with writer.RunWriter(inp, rank=1) as other:  # not rank 0: writes nothing
        other.metrics(40, 1.0)
    rows = [json.loads(x) for x in (tmp_path / layout.METRICS).read_text().splitlines()]
    assert [r["step"] for r in rows] == [5, 10, 15, 20, 25, 30, 35]
    assert rows[-1]["loss"] is None and rows[0]["tokens"] == 5 * inp["tokens_per_step"]
    with writer.RunWriter(inp, resume_step=15) as w:  # restored step 15: 20.. are redone
        w.metrics(20, 3.0)
    rows = [json.loads(x) for x in (tmp_path / layout.METRICS).read_text().splitlines()]
    assert [(r["step"], r["loss"]) for r in rows] == [(5, 4.5), (10, 4.0), (15, 3.5), (20, 3.0)]
    assert (tmp_path / layout.EVAL).read_text() == ""


class _Hooks:
    def __init__(self):
        self.steps, self.evals = [], []

    def on_step(self, step, row):
        self.steps.append(step)

    def on_eval(self, step, row):
        self.evals.append(step)


def test_rows_are_followed_as_they_grow_and_not_again_after_a_resume(spec, tmp_path):
    inp = _input(spec, tmp_path)
    w = writer.RunWriter(inp)
    w.metrics(5, 5.0)
    w.close()
    hooks, progress = _Hooks(), []
    follower = Follower(tmp_path, inp, [hooks], progress.append)  # a restart: step 5 was delivered before
    with writer.RunWriter(inp, resume_step=5) as w:
        w.metrics(10, 4.0)
        follower.poll()
        with open(tmp_path / layout.METRICS, "a") as fh:
            fh.write('{"step": 15, "lo')  # a row being written: not delivered yet
        follower.poll()
        assert hooks.steps == [10] and progress[-1]["step"] == 10 and progress[-1]["total_steps"] == inp["steps"]
        with open(tmp_path / layout.METRICS, "a") as fh:
            fh.write('ss": 3.0}\n')
        w.eval(20, 3.5)
        follower.poll()
    assert hooks.steps == [10, 15] and hooks.evals == [20]
    with open(tmp_path / layout.METRICS, "a") as fh:
        fh.write("not json\n")
    with pytest.raises(RowError, match=rf"{layout.METRICS}:4: a row that is not a JSON object"):
        follower.poll()


def test_result_needs_the_final_eval(spec, tmp_path):
    inp = _input(spec, tmp_path)
    steps = inp["steps"]
    with writer.RunWriter(inp) as w:
        w.metrics(steps, 3.0, tokens_per_s=100.0)
        w.eval(steps - 5, 3.2)
    with pytest.raises(NoFinalEval, match=f"without a final eval row .* at step {steps}"):
        result(inp, tmp_path, 1.0, {"kind": "command"})
    with writer.RunWriter(inp, resume_step=steps) as w:
        w.eval(steps, 3.1, **{"eval_loss/code": 3.0, "eval_loss/prose": 3.2, "task_acc/cloze": 0.4})
    with pytest.raises(NoFinalEval, match=layout.FINAL_EVAL):  # the final sample differs from the evals'
        result(inp, tmp_path, 1.0, {"kind": "command"})
    with writer.RunWriter(inp, resume_step=steps) as w:
        w.final_eval(steps, 3.05, **{"eval_loss/code": 2.9, "eval_loss/prose": 3.2})
    res = result(inp, tmp_path, 1.0, {"kind": "command"})
    assert res["final_eval_loss"] == 3.05 and res["final_sample_eval_loss"] == 3.1
    assert res["final_eval_loss_by_domain"] == {"code": 2.9, "prose": 3.2}
    assert res["final_task_metrics"] == {"task_acc/cloze": 0.4}  # the last eval row's, on the same parameters
    assert res["trainer"] == {"kind": "command"} and res["tokens"] == steps * inp["tokens_per_step"]


def test_a_loss_spike_in_the_rows_is_an_event_as_the_builtin_trainer_records_it(spec, tmp_path):
    inp = _input(spec, tmp_path)
    follower = Follower(tmp_path, inp)
    rng = np.random.default_rng(0)
    with writer.RunWriter(inp) as w:
        for step in range(1, 41):
            w.metrics(step, 3.0 + 0.01 * rng.standard_normal(), grad_norm=1.0 + 0.01 * rng.standard_normal())
        w.metrics(41, 30.0, grad_norm=1.0)
        follower.poll()
    events = [json.loads(x) for x in (tmp_path / layout.EVENTS).read_text().splitlines()]
    assert [(e["step"], e["event"], e["metric"]) for e in events] == [(41, "spike", "loss")]
