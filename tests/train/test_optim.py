import numpy as np
import pytest

from ladder.spec import OptimSpec, ScheduleSpec
from ladder.trainers.builtin.optim import (
    branch_points,
    branch_schedule,
    decay_mask,
    lr_multipliers,
    lr_schedule,
    param_group,
)


def test_wsd_schedule_warmup_stable_and_1_sqrt_cooldown(rung_factory):
    r = rung_factory(steps=100, schedule=ScheduleSpec(kind="wsd", warmup_steps=10, decay_frac=0.2), optim=OptimSpec(lr=1.0))
    lr = lr_schedule(r)
    assert lr.shape == (100,)
    np.testing.assert_allclose(lr[:10], np.arange(1, 11) / 10)
    assert np.all(lr[10:80] == 1.0)
    frac = (np.arange(80, 100) - 80 + 1) / 20
    np.testing.assert_allclose(lr[80:], 1 - np.sqrt(frac))
    assert lr[-1] == 0.0


@pytest.mark.parametrize("kind", ["cosine", "linear", "constant"])
def test_other_schedules(kind, rung_factory):
    r = rung_factory(steps=50, schedule=ScheduleSpec(kind=kind, warmup_frac=0.1, final_lr_frac=0.1), optim=OptimSpec(lr=2.0))
    lr = lr_schedule(r)
    assert lr.max() == pytest.approx(2.0)
    assert np.all(np.diff(lr[5:]) <= 1e-12)
    assert lr[-1] == pytest.approx(2.0 if kind == "constant" else 0.2)


def test_branches_are_shorter_wsd_runs(rung_factory):
    r = rung_factory(steps=100, schedule=ScheduleSpec(kind="wsd", warmup_steps=5, decay_frac=0.2, branch_fracs=(0.25, 0.5, 1.0)),
                  optim=OptimSpec(lr=1.0))
    pts = branch_points(r)
    assert pts == [{"frac": 0.25, "start": 20, "end": 25}, {"frac": 0.5, "start": 40, "end": 50}]
    b = branch_schedule(r, 40, 50)
    main = lr_schedule(rung_factory(steps=50, schedule=ScheduleSpec(kind="wsd", warmup_steps=5, decay_frac=0.2),
                                 optim=OptimSpec(lr=1.0)))
    np.testing.assert_allclose(b, main[40:])


def test_groups_and_decay_mask():
    names = ["embed", "head", "final_norm.scale", "layers.0.attn.q_norm.scale", "layers.0.mlp.router",
             "layers.0.attn.wqkv", "layers.0.mlp.w13"]
    assert [param_group(n) for n in names] == ["embed", "embed", "norm", "norm", "router", "matrix", "matrix"]
    mask = decay_mask(dict.fromkeys(names))
    assert [mask[n] for n in names] == [True, True, False, False, False, True, True]
    mult = lr_multipliers(names, OptimSpec(router_lr_mult=0.5, norm_lr_mult=2.0, embed_lr_mult=3.0))
    assert [mult[n] for n in names] == [3.0, 3.0, 2.0, 2.0, 0.5, 1.0, 1.0]
