"""A hero's mid-run data-mix switch carried into its live forecast by the effect its replayed rungs measured
(ladder.analysis.change_effect): the effect read from rungs imported for experiments/tiny_switch.py and its
`replay` variant (finals drawn with a known effect, never trained), and the followed forecast's snapshot on a
synthetic ladder of rung curves with and without the effect (and without replayed rungs: the widened band)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
SWITCH = str(REPO / "experiments" / "tiny_switch.py")
EFFECT = 1.1  # the switch's compute-equivalent multiplier drawn into the replayed rungs


def law(c: float) -> float:
    return 1.0 + 40.0 * c ** -0.1


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)


def test_the_replayed_rungs_effect_is_measured_for_the_heros_switch(tmp_path, capsys):
    import dataclasses

    from ladder.analysis.change_effect import carried_effects, replaying_variant
    from ladder.cli.follow import _with_change_effects
    from ladder.spec import load_spec

    root = tmp_path / "root"

    def load(variant=None):
        return dataclasses.replace(load_spec(SWITCH, variant=variant), root=str(root))

    spec = load()
    change = spec.hero.changes[0]
    assert replaying_variant(spec, change, load) == "replay"
    rng = np.random.default_rng(0)
    rows_a, rows_b = [], []
    for run in spec.rungs:  # one seed a size, the same seed in both: paired
        luck = math.exp(rng.normal(0.0, 0.007))
        rows_a.append({"name": run.name, "loss": law(run.flops) * luck})
        rows_b.append({"name": run.name, "loss": law(run.flops * EFFECT) * luck * math.exp(rng.normal(0.0, 0.002))})
    pd.DataFrame(rows_a).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(rows_b).to_csv(tmp_path / "b.csv", index=False)
    assert run_cli("import-results", SWITCH, str(tmp_path / "a.csv"), "--root", str(root)).returncode == 0

    # the replaying variant unfinished: nothing carried, and why
    (effect,) = carried_effects(spec, load, 0.9, n_draws=40)
    assert not effect["ok"] and "unfinished" in effect["reason"] and effect["variant"] == "replay"

    proc = run_cli("import-results", SWITCH, str(tmp_path / "b.csv"), "--variant", "replay", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    # as `ladder follow` reads it: into the forecast's context, said in one line
    ctx = _with_change_effects(synthetic_context(), spec, load)
    (effect,) = ctx.change_effects
    assert "replayed by --variant replay: its measured effect is carried past it" in capsys.readouterr().out
    assert effect["ok"] and effect["step"] == change.step and effect["frac"] == pytest.approx(0.3, abs=0.01)
    true_ratio = law(spec.hero.flops * EFFECT) / law(spec.hero.flops)  # the switched hero's loss over the unswitched's
    assert effect["lower"] < true_ratio < effect["upper"] < 1.0
    assert effect["log_ratio"] == pytest.approx(math.log(effect["ratio"]))
    assert "tiny+replay" in effect["text"]
    # finals imported without curves: the share grows in proportion to the run past the switch, and it says so
    assert effect["shape"] is None and "in proportion to the run past the switch" in effect["text"]


def synthetic_context():
    """A followed hero's context on four rung curves of a known law (no ladder): the hero 5x past the largest."""
    from fits.matched_progress_choice import CANDIDATES, Axis
    from ladder.analysis.follow_forecast import Context

    totals, fracs = (1e15, 3e15, 1e16, 3e16), np.round(np.arange(0.1, 1.001, 0.1), 2)
    rows = [{"run": f"r{i}", "step": int(f * 100), "frac": f, "frac_snap": f, "flops": t * f, "total_flops": t,
             "loss": 1.5 + 300.0 * (t * f) ** -0.15} for i, t in enumerate(totals) for f in fracs]
    points = pd.DataFrame(rows)
    target = 1.5e17
    steps = np.arange(10, 1001, 10)
    centre = 1.5 + 300.0 * (target * steps / 1000) ** -0.15
    prior = pd.DataFrame({"step": steps, "frac": steps / 1000, "loss": centre, "lower": centre * 0.97, "upper": centre * 1.03})
    axis = Axis("ours", points[["run", "step", "frac", "frac_snap", "flops", "total_flops", "loss"]], target)
    return Context(axis=axis, fit_fn=CANDIDATES["progress_deg1"], prior=prior, level=0.9, decades=0.7,
                   total_steps=1000, batch_tokens=100)


def test_the_followed_forecast_past_the_switch_carries_the_measured_effect_else_widens():
    import dataclasses

    from ladder.analysis.follow_forecast import snapshot
    from ladder.spec import RunChange

    ctx = synthetic_context()
    hero = pd.DataFrame({"step": [100, 200], "frac": [0.1, 0.2]}).assign(
        loss=lambda d: 1.5 + 300.0 * (1.5e17 * d["frac"]) ** -0.15)
    change = RunChange(300, "data mix", weights={"code": 0.8})
    base, _ = snapshot(ctx, hero, 200, [], {}, ())
    widened, summary = snapshot(ctx, hero, 200, [], {}, (change,))
    past = base["frac"].to_numpy() > 0.3
    # no replayed rungs: the centre kept, the band at least the rungs-only band past the change
    assert widened["loss"].to_numpy() == pytest.approx(base["loss"].to_numpy(), rel=1e-12)
    assert np.all(widened["upper"].to_numpy()[past] >= ctx.prior["upper"].to_numpy()[past] * (1 - 1e-12))
    assert "at least the prior band" in summary["band_rule"] and summary["change_effects"] == []

    ratio, sigma = 0.97, 0.01
    effect = {"step": 300, "frac": 0.3, "ok": True, "ratio": ratio, "log_ratio": math.log(ratio), "sigma": sigma,
              "lower": 0.95, "upper": 0.99, "variant": "replay", "text": "x0.9700 [0.9500, 0.9900] from tiny+replay"}
    carried, summary = snapshot(dataclasses.replace(ctx, change_effects=(effect,)), hero, 200, [], {}, (change,))
    share = np.clip((base["frac"].to_numpy() - 0.3) / 0.7, 0.0, 1.0)
    # the unswitched forecast times the ratio, in proportion to the run past the switch: the whole of it at the end
    assert carried["loss"].to_numpy() == pytest.approx(base["loss"].to_numpy() * ratio ** share, rel=1e-12)
    assert summary["predicted_final"] == pytest.approx(float(base["loss"].iloc[-1]) * ratio, rel=1e-12)
    # its log band: the forecast's and the effect's in quadrature (ctx.z the forecast's normal quantile)
    base_sigma = np.log(base["upper"] / base["loss"]).to_numpy() / ctx.z
    carried_sigma = np.log(carried["upper"] / carried["loss"]).to_numpy() / ctx.z
    assert carried_sigma == pytest.approx(np.hypot(base_sigma, share * sigma), rel=1e-9)
    assert "carried, x0.9700" in summary["band_rule"] and summary["change_effects"][0]["variant"] == "replay"
    # an effect measured for another step is not this change's: the band widens
    other = dataclasses.replace(ctx, change_effects=({**effect, "step": 500},))
    _, summary = snapshot(other, hero, 200, [], {}, (change,))
    assert "at least the prior band" in summary["band_rule"]


def test_the_report_says_the_live_forecast_carried_the_switch(tmp_path):
    """A followed hero's state names the change whose replayed rungs' effect its forecast carried: the report's
    follow section keeps it and its declared-change line says so."""
    import json

    from ladder.analysis.follow_report import followed
    from ladder.outputs import layout
    from ladder.report.build import _progress_lines

    out = tmp_path / "follow"
    out.mkdir()
    (out / layout.FORECASTS).write_text(json.dumps({"at_step": 200, "predicted_final": 1.2, "lower": 1.1, "upper": 1.3}) + "\n")
    carried = {"step": 300, "tokens": 30000, "what": "data mix", "note": "", "effect_ok": True,
               "effect": "carried: x0.9700 [0.9500, 0.9900] from the rungs of tiny+replay, which replay it"}
    (out / "state.json").write_text(json.dumps({"polls": 1, "changes": [carried, {"step": 600, "what": "lr", "note": ""}]}))
    follow = followed(tmp_path, {})["follow"]
    assert follow["change_effects"] == [{k: carried[k] for k in ("step", "what", "effect", "effect_ok")}]
    lines = _progress_lines({"hero": {"follow": follow, "changes": [{"step": 300, "what": "data mix"},
                                                                    {"step": 600, "what": "lr"}]}}, lambda x, spec=".4f": str(x))
    assert any("step 300: data mix; the live forecast past it: carried: x0.9700" in line for line in lines)
    assert any(line.endswith("declared change at step 600: lr") for line in lines)


def test_the_effects_share_along_the_run_is_read_off_the_replayed_rungs_curves():
    from ladder.analysis.change_carry import carry, ramp_shape

    # five sizes evaluated at 20..100% of their runs, the switch at 30%: B is A before it (the same data), and
    # its effect comes in fast after it; each size's effect is its own, the shape the same
    share = {0.2: 0.0, 0.4: 0.8, 0.6: 0.95, 0.8: 1.02, 1.0: 1.0}
    rows = [{"run": f"r{i}", "frac": f + 0.001 * i, "log_ratio": -0.02 * s * (1 + 0.05 * i)}
            for i in range(5) for f, s in share.items()]
    shape = ramp_shape(pd.DataFrame(rows), 0.3)
    assert [f for f, _ in shape] == pytest.approx([0.3, 0.4, 0.6, 0.8, 1.0])
    assert [s for _, s in shape] == pytest.approx([0.0, 0.8, 0.95, 1.02, 1.0], rel=1e-9)
    effect = {"frac": 0.3, "log_ratio": math.log(0.97), "sigma": 0.01, "shape": shape}
    fracs = np.array([0.2, 0.3, 0.4, 0.5, 1.0])
    central, sigma = carry(fracs, np.ones(5), np.full(5, 0.02), effect)
    assert central == pytest.approx(0.97 ** np.array([0.0, 0.0, 0.8, 0.875, 1.0]), rel=1e-12)
    assert sigma[0] == pytest.approx(0.02) and sigma[-1] == pytest.approx(math.hypot(0.02, 0.01))
    # without a shape: in proportion to the run past the switch
    linear, _ = carry(fracs, np.ones(5), np.zeros(5), {**effect, "shape": None})
    assert linear == pytest.approx(0.97 ** np.array([0.0, 0.0, 1 / 7, 2 / 7, 1.0]), rel=1e-12)
    # a final effect inside its own scatter over the sizes shapes nothing; nor do curves without a final eval
    noisy = [{**r, "log_ratio": r["log_ratio"] + (0.05 if int(r["run"][1]) % 2 else -0.05)} for r in rows]
    assert ramp_shape(pd.DataFrame(noisy), 0.3) is None
    assert ramp_shape(pd.DataFrame([r for r in rows if r["frac"] < 0.9]), 0.3) is None
    assert ramp_shape(pd.DataFrame({"run": [], "frac": [], "log_ratio": []}), 0.3) is None


def test_a_followed_hero_carries_the_effect_and_its_state_says_so(tmp_path):
    """`ladder follow`'s poll on the synthetic context with a measured effect: the snapshot past the switch is
    carried by it, and state.json's change row says so (what the report and the dashboard read)."""
    import dataclasses
    import json

    from ladder.analysis.follow import FollowConfig, Follower
    from ladder.analysis.follow_source import Source
    from ladder.outputs import layout
    from ladder.spec import RunChange

    effect = {"step": 300, "frac": 0.3, "ok": True, "ratio": 0.97, "log_ratio": math.log(0.97), "sigma": 0.01,
              "lower": 0.95, "upper": 0.99, "variant": "replay", "what": "data mix", "shape": None,
              "text": "x0.9700 [0.9500, 0.9900] at the final from the rungs of tiny+replay"}
    ctx = dataclasses.replace(synthetic_context(), change_effects=(effect,))
    feed = tmp_path / "eval.jsonl"
    feed.write_text("".join(json.dumps({"step": s, "tokens": s * 100, "eval_loss": 1.5 + 300.0 * (1.5e17 * s / 1000) ** -0.15})
                            + "\n" for s in (100, 200)))
    changes = (RunChange(300, "data mix", weights={"code": 0.8}), RunChange(600, "lr"))
    follower = Follower(tmp_path / "follow", ctx, Source("jsonl", str(feed)), changes, FollowConfig(), say=lambda _: None)
    follower.poll()
    (snap,) = list(layout.iter_jsonl(tmp_path / "follow" / layout.FORECASTS))
    assert "carried, x0.9700" in snap["band_rule"] and "step 600 (0 of 3 points after it): at least the prior band" \
        in snap["band_rule"]
    rows = json.loads((tmp_path / "follow" / "state.json").read_text())["changes"]
    assert rows[0]["effect_ok"] and rows[0]["effect"].startswith("carried: x0.9700") and "effect" not in rows[1]
