"""One live-forecast rule for a hero trained here and a followed hero: the smoke hero's evals replayed
through its training callback give the snapshots `ladder follow` makes when fed the same evals up to the
same steps (the same centre, chosen on the rungs, and band), and no band is narrower than that centre's measured
error on the rungs at its horizon."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]


def test_trained_hero_snapshots_are_follows(ladder_smoke_root, tmp_path):
    from ladder.analysis.follow import FollowConfig, Follower
    from ladder.analysis.follow_forecast import load_context
    from ladder.analysis.follow_source import Source
    from ladder.analysis.forecast import ForecastCallback
    from ladder.dag import queries
    from ladder.outputs import layout
    from ladder.spec.load import load_spec

    root = tmp_path / "root"
    # a copy elsewhere: the callback must find the rungs beside the fit, not where the fit once recorded them
    shutil.copytree(ladder_smoke_root, root, ignore=shutil.ignore_patterns("wandb", "checkpoints", "follow"))
    spec = dataclasses.replace(load_spec(str(REPO / "experiments" / "smoke.py")), root=str(root))
    dirs = queries.step_dirs(spec)
    evals = [r for r in layout.iter_jsonl(Path(dirs["hero"]) / layout.EVAL)]
    out = tmp_path / "hero"
    out.mkdir()
    callback = ForecastCallback(spec.hero, str(out), {"fit": dirs["fit"], "predict": dirs["predict"]})
    for row in evals:
        callback.on_eval(int(row["step"]), row)
    trained = list(layout.iter_jsonl(out / layout.FORECASTS))
    assert len(trained) >= 3 and all(s["band_rule"].startswith(("horizon", "the run's last eval")) for s in trained)
    assert trained[-1]["predicted_final"] == pytest.approx(evals[-1]["eval_loss"])  # the last snapshot is the final

    # `ladder follow`'s own context (the rungs from the spec's plan), fed the same evals up to each snapshot
    ctx = load_context(dirs["fit"], dirs["predict"], spec.hero.steps, spec.hero.batch_tokens, dirs,
                       [r.name for r in spec.rungs])
    feed = tmp_path / "eval.jsonl"
    follower = Follower(tmp_path / "follow", ctx, Source("jsonl", str(feed)), (), FollowConfig(), say=lambda _: None)
    for snap in trained:
        feed.write_text("".join(json.dumps(r) + "\n" for r in evals if r["step"] <= snap["at_step"]))
        follower.poll()
    followed = follower.state["snapshots"]
    assert [s["at_step"] for s in followed] == [s["at_step"] for s in trained]
    for a, b in zip(trained, followed, strict=True):
        for key in ("predicted_final", "lower", "upper"):
            assert a[key] == pytest.approx(b[key], rel=1e-9), (a["at_step"], key)
        assert a["band_rule"] == b["band_rule"] and a["centre_rule"] == b["centre_rule"]

    # the report scores both the same way: each snapshot on the evals after it
    from ladder.analysis.follow_report import followed
    from ladder.report.curves import trained_snapshots

    shutil.copy(Path(dirs["hero"]) / layout.EVAL, out / layout.EVAL)
    scored = ["later_points", "later_mean_abs_rel_error", "later_inside_band", "later_mean_band_half_width"]
    mine, theirs = trained_snapshots(str(out)), followed(tmp_path, {})["snapshots"]
    assert len(mine) == len(theirs) and all(a.get("later_points") for a in mine[:-1])
    for a, b in zip(mine, theirs, strict=True):
        if a.get("later_points"):
            assert {k: a[k] for k in scored} == pytest.approx({k: b[k] for k in scored}), a["at_step"]
        else:  # the last snapshot: no point after it
            assert not b.get("later_points")
    assert mine[0]["later_points"] == len([r for r in evals if r["step"] > trained[0]["at_step"]])

    # each centre is the one with the smaller rung-backtest error at the final's horizon (chosen on the rungs only),
    # and no band is narrower than that centre's rung snapshot error at its horizon and distance, within the horizons
    # measured (the rungs-only band bounds the extrapolation past them)
    from ladder.analysis.follow_bands import profile_sigma
    from ladder.analysis.follow_forecast import choose_centre
    from ladder.analysis.shape_centre import carried, largest_run

    z, rungs = ctx.z, follower.rungs
    assert {s["centre_rule"] for s in trained[:-1]} <= {"law", "shape"}
    hero_pts = pd.DataFrame(evals).query("step > 0")
    for s in trained[:-1]:
        rule, errs = choose_centre(rungs, s["at_frac"])
        assert s["centre_rule"] == rule == min(errs, key=errs.get) and s["centre_errors"] == pytest.approx(errs)
        profile = rungs["shape"] if rule == "shape" else rungs
        curve = pd.read_csv(out / layout.FORECAST_DIR / f"{s['at_step']}.csv")
        f = curve["frac"].to_numpy(float)
        ahead = f > s["at_frac"] + 1e-9
        if rule == "shape":  # the hero's latest eval carried along the largest rung's shape
            last = hero_pts[hero_pts["step"] <= s["at_step"]].iloc[-1]
            want = carried(ctx.axis.points, largest_run(ctx.axis.points), last["step"] / spec.hero.steps,
                           float(last["eval_loss"]), f)
            assert curve["loss"].to_numpy(float) == pytest.approx(want, rel=1e-9)
        sigma = np.log(curve["upper"].to_numpy(float) / curve["loss"].to_numpy(float))[ahead] / z
        need = profile_sigma(profile, np.log(f[ahead] / s["at_frac"]), extrapolate=False)
        need = need * max(ctx.decades, 1e-3) ** profile["decade_power"]
        assert np.all(sigma >= need - 1e-9), s["at_step"]
