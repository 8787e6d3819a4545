"""Eval and checkpoint cadence: `n_evals` and `n_checkpoints` set how often a run stops to evaluate and
to save, and never what it trains."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import DENSE, make_rung

from ladder.spec import LadderSpec, SpecError, validate
from ladder.trainers.builtin import train
from ladder.trainers.cadence import cadence

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


def test_n_evals_means_that_many_evals_the_last_at_the_end(tmp_path, data_spec):
    # 12 steps, 5 evals: multiples of 12 // 5 gave six (2, 4, ..., 10 and 12), the 10th and 12th a step apart
    out, result, seen = _run(tmp_path, data_spec, "five", n_evals=5, n_checkpoints=5)
    assert len(seen.evals) == 5 and seen.evals[-1] == STEPS and len(set(seen.evals)) == 5
    assert len(seen.ckpts) == 5 and seen.ckpts[-1] == STEPS
    assert min(b - a for a, b in zip([0, *seen.evals], seen.evals, strict=False)) >= STEPS // 5
    assert list(pd.read_json(out / "eval.jsonl", lines=True)["step"]) == seen.evals


@pytest.mark.parametrize("total", [12, 1596, 2346, 4596, 6162, 7])
@pytest.mark.parametrize("n", [1, 3, 5, 10])
def test_cadence_counts(total, n):
    steps = sorted(cadence(total, 0, n))
    assert len(steps) == min(n, total) and steps[-1] == total and steps[0] >= 1
    gaps = [b - a for a, b in zip([0, *steps], steps, strict=False)]
    assert max(gaps) - min(gaps) <= 1  # evenly spread: no eval a step before the last
    assert sorted(cadence(total, 4, n)) == [*range(4, total, 4), total]  # an explicit interval is kept


def test_a_cadence_of_zero_is_refused_naming_the_field(data_spec):
    rung = make_rung(DENSE, steps=STEPS, n_evals=0)
    with pytest.raises(SpecError) as err:
        validate(LadderSpec(name="x", rungs=(rung, make_rung(DENSE, steps=STEPS, name="u")), data=data_spec))
    assert any(p.startswith("rungs[0].n_evals:") and "positive integer" in p for p in err.value.problems), err.value.problems
