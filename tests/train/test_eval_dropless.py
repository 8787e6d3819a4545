"""Dropless evals of a mixture of experts (data.eval_dropless): real tiny runs on real text."""

import dataclasses
import json

import jax.numpy as jnp
import pytest

from ladder.executor.hashing import hashed_config
from ladder.spec import SpecError, data_from_dict, to_dict, validate
from ladder.trainers.builtin import optim as optim_lib
from ladder.trainers.builtin import train
from ladder.trainers.builtin.checkpoint import Checkpointer
from ladder.trainers.builtin.data import Mixture
from ladder.trainers.builtin.evaluate import make_run_eval
from ladder.trainers.builtin.jitted import make_eval
from ladder.trainers.builtin.metrics import read_jsonl
from ladder.trainers.builtin.model import build

STEPS = 16


def tight(moe_spec):
    # Half a slot per choice: every window drops expert outputs under capacity dispatch.
    return dataclasses.replace(moe_spec, capacity_factor=0.5)


@pytest.fixture(scope="module")
def runs(data_spec, tmp_path_factory):
    from conftest import MOE, make_rung

    rung = make_rung(tight(MOE), steps=STEPS, eval_every=8)
    out = {}
    for dropless in (True, False):
        d = tmp_path_factory.mktemp(f"dropless_{dropless}")
        out[dropless] = (d, train(rung, dataclasses.replace(data_spec, eval_dropless=dropless), d))
    return rung, out


def test_dropless_evals_read_every_tokens_experts_and_training_is_unchanged(runs, data_spec):
    rung, out = runs
    (d_on, r_on), (d_off, r_off) = out[True], out[False]
    assert data_spec.eval_dropless  # the default
    # Training keeps capacity dispatch: the same steps to the bit; only the evals differ.
    assert [r["loss"] for r in read_jsonl(d_on / "metrics.jsonl")] == [r["loss"] for r in read_jsonl(d_off / "metrics.jsonl")]
    # The dropless final is the trained parameters evaluated with every expert computed for every token;
    # the capacity final, the same parameters through the training's dispatch.
    finals = {}
    for dispatch in ("dense", "capacity"):
        fm = build(rung.model, int(rung.seed), dispatch=dispatch)
        opt = optim_lib.make_optimizer(rung.optim, fm.params)
        step, params, bias, _, _ = Checkpointer(d_on / "checkpoints").restore_latest(
            fm.params, fm.bias, opt.init(fm.params), {"step": 0, "seed": 0, "wall_s": 0.0})
        assert step == STEPS
        params = {k: jnp.asarray(v) for k, v in params.items()}
        bias = {k: jnp.asarray(v) for k, v in bias.items()}
        mixture = Mixture(data_spec, rung.seq_len, int(rung.seed))
        run_eval = make_run_eval(mixture, make_eval(fm), rung.batch_size, rung.seq_len, 1.0)
        finals[dispatch] = run_eval(params, bias, STEPS, data_spec.eval_tokens)["eval_loss"]
    assert finals["dense"] == pytest.approx(r_on["final_eval_loss"], rel=1e-6)
    assert finals["dense"] == pytest.approx(read_jsonl(d_on / "eval.jsonl")[-1]["eval_loss"], rel=1e-6)
    assert finals["capacity"] == pytest.approx(r_off["final_eval_loss"], rel=1e-6)
    # Sixteen steps from a near-uniform start: the experts' share is small, but 20x the tolerance above.
    assert abs(finals["dense"] / finals["capacity"] - 1) > 2e-5


def test_a_dropless_loss_is_each_tokens_own_not_its_windows(moe_spec, data_spec):
    # Capacity slots are claimed in token order within a window, so a token's output depends on the
    # tokens before it in the same group and on the group's size; dropless, only on its context.
    spec = tight(moe_spec)
    tokens = jnp.asarray(Mixture(data_spec, 32, 0).eval_windows(0, 4 * 32)[:, :-1])
    for dispatch, same in (("dense", True), ("capacity", False)):
        fm = build(spec, 0, dispatch=dispatch)
        whole, _ = fm.apply(fm.params, fm.bias, tokens)
        half, _ = fm.apply(fm.params, fm.bias, tokens[:, :16])
        gap = float(jnp.max(jnp.abs(whole[:, :16] - half)))
        assert (gap < 1e-4) == same, (dispatch, gap)


def test_the_field_moves_a_runs_address_and_an_older_config_reads_capacity(data_spec):
    old = to_dict(data_spec)
    old.pop("eval_dropless")
    assert data_from_dict(old).eval_dropless is False  # a config from before the field evaluated with capacity
    off = to_dict(dataclasses.replace(data_spec, eval_dropless=False))
    assert json.dumps(hashed_config(off)) == json.dumps(hashed_config(old))
    assert hashed_config(to_dict(data_spec)) != hashed_config(old)


def test_a_non_boolean_is_refused_naming_the_field(data_spec):
    from conftest import make_rung

    from ladder.spec import LadderSpec

    spec = LadderSpec(name="t", rungs=(make_rung(name="r"),), data=dataclasses.replace(data_spec, eval_dropless="yes"))
    with pytest.raises(SpecError) as err:
        validate(spec)
    assert any(p.startswith("data.eval_dropless: expected True or False") for p in err.value.problems)
