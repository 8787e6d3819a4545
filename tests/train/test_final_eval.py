"""The final eval on its own, larger sample (data.final_eval_tokens): real tiny runs on real text."""

import dataclasses
import json

import pytest

from ladder.executor.hashing import hashed_config
from ladder.spec import data_from_dict, to_dict
from ladder.trainers.builtin import train
from ladder.trainers.builtin.metrics import read_jsonl

STEPS = 16


@pytest.fixture(scope="module")
def runs(data_spec, tmp_path_factory):
    """The same rung with the final eval on the shared sample (0), on 8x it, and with every eval on 8x it."""
    from conftest import make_rung

    rung = make_rung(steps=STEPS, eval_every=8)
    big = 8 * data_spec.eval_tokens
    out = {}
    for tag, data in (("default", data_spec), ("larger", dataclasses.replace(data_spec, final_eval_tokens=big)),
                      ("all_larger", dataclasses.replace(data_spec, eval_tokens=big))):
        d = tmp_path_factory.mktemp(tag)
        out[tag] = (d, train(rung, data, d))
    return rung, out


def test_the_final_is_read_on_final_eval_tokens_after_the_last_step(runs, data_spec):
    _, out = runs
    (d_def, r_def), (d_big, r_big), (d_all, r_all) = out["default"], out["larger"], out["all_larger"]
    last = read_jsonl(d_def / "eval.jsonl")[-1]
    assert last["step"] == STEPS and r_def["final_eval_loss"] == last["eval_loss"]
    assert r_def["final_eval_tokens"] == data_spec.eval_tokens and r_def["final_sample_eval_loss"] is None
    # 8x the windows for the final alone: the curve keeps the shared sample, the laws get another number.
    assert r_big["final_eval_tokens"] == 8 * data_spec.eval_tokens
    assert read_jsonl(d_big / "eval.jsonl") == read_jsonl(d_def / "eval.jsonl")
    assert r_big["final_sample_eval_loss"] == r_def["final_eval_loss"]
    assert r_big["final_eval_loss"] != r_def["final_eval_loss"]
    # ...the very number a run evaluating on 8x throughout reads at its last step: the final pass reads
    # the trained parameters on those windows, not an earlier step's.
    assert r_big["final_eval_loss"] == read_jsonl(d_all / "eval.jsonl")[-1]["eval_loss"] == r_all["final_eval_loss"]
    assert r_big["final_eval_loss_by_domain"] == r_all["final_eval_loss_by_domain"]
    w = {d.name: d.weight for d in data_spec.domains}
    assert r_big["final_eval_loss"] == pytest.approx(sum(w[k] * v for k, v in r_big["final_eval_loss_by_domain"].items()))


def test_a_finished_run_that_lost_its_result_reads_the_same_final_again(runs, data_spec):
    rung, out = runs
    d, first = out["larger"]
    (d / "result.json").unlink()  # a crash after the last checkpoint, before result.json
    again = train(rung, dataclasses.replace(data_spec, final_eval_tokens=8 * data_spec.eval_tokens), d)
    assert again["final_eval_loss"] == first["final_eval_loss"]
    assert again["final_sample_eval_loss"] == first["final_sample_eval_loss"]


def test_every_eval_of_the_hero_reads_the_finals_sample(data_spec):
    from conftest import make_rung

    from ladder.dag.train_steps import train_config
    from ladder.spec import LadderSpec

    spec = LadderSpec(name="t", rungs=(make_rung(name="r"),), hero=make_rung(name="h"),
                      data=dataclasses.replace(data_spec, final_eval_tokens=4096))
    assert train_config(spec, spec.hero, "hero")["data"]["eval_tokens"] == 4096
    assert train_config(spec, spec.rungs[0], "rung")["data"]["eval_tokens"] == data_spec.eval_tokens
    plain = dataclasses.replace(spec, data=data_spec)
    assert train_config(plain, plain.hero, "hero")["data"] == to_dict(data_spec)


def test_the_field_at_0_keeps_a_run_at_its_address_any_other_value_moves_it(data_spec):
    old = to_dict(data_spec)
    old.pop("final_eval_tokens")
    assert data_from_dict(old).final_eval_tokens == 0  # a config written before the field
    at_0 = to_dict(dataclasses.replace(data_spec, final_eval_tokens=0))
    larger = to_dict(dataclasses.replace(data_spec, final_eval_tokens=4096))
    assert json.dumps(hashed_config(at_0)) == json.dumps(hashed_config(old))
    assert hashed_config(larger) != hashed_config(old)
