"""Eval and checkpoint cadence: `n_evals` and `n_checkpoints` set how often a run stops to evaluate and
to save, and never what it trains."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import DENSE, make_rung

from ladder.spec import LadderSpec, SpecError, validate
from ladder.train import train

STEPS = 12


class Seen:
    def __init__(self):
        self.evals, self.ckpts = [], []

    def on_eval(self, step, row):
        self.evals.append(step)

    def on_checkpoint(self, step):
        self.ckpts.append(step)


def _run(tmp_path, data_spec, name, **kw):
    seen = Seen()
    out = tmp_path / name
    result = train(make_rung(DENSE, steps=STEPS, **kw), data_spec, out, callbacks=[seen])
    return out, result, seen


def test_fewer_evals_and_checkpoints_train_the_same_run(tmp_path, data_spec):
    out_a, every, seen_a = _run(tmp_path, data_spec, "every", eval_every=1, checkpoint_every=1)
    out_b, few, seen_b = _run(tmp_path, data_spec, "few", n_evals=3, n_checkpoints=2)
    assert seen_a.evals == list(range(1, STEPS + 1))
    assert seen_b.evals == [4, 8, 12] and seen_b.ckpts == [6, 12]
    assert list(pd.read_json(out_b / "eval.jsonl", lines=True)["step"]) == [4, 8, 12]
    # Stopping to evaluate or save at other steps leaves training bit-identical: the same losses at every
    # step and the same final eval (the last eval sees the same parameters).
    loss_a = pd.read_json(out_a / "metrics.jsonl", lines=True)["loss"].to_numpy()
    loss_b = pd.read_json(out_b / "metrics.jsonl", lines=True)["loss"].to_numpy()
    np.testing.assert_array_equal(loss_a, loss_b)
    assert few["final_eval_loss"] == every["final_eval_loss"]
    assert few["final_train_loss"] == every["final_train_loss"]
    assert json.loads((out_b / "result.json").read_text())["steps"] == STEPS


def test_a_cadence_of_zero_is_refused_naming_the_field(data_spec):
    rung = make_rung(DENSE, steps=STEPS, n_evals=0)
    with pytest.raises(SpecError) as err:
        validate(LadderSpec(name="x", rungs=(rung, make_rung(DENSE, steps=STEPS, name="u")), data=data_spec))
    assert any(p.startswith("rungs[0].n_evals:") and "positive integer" in p for p in err.value.problems), err.value.problems
