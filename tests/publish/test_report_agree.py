"""On a real smoke ladder, every number the report and the dashboard both show means the same:
band exits on the same series (the hero's eval points) from the same start, the law's parameters with
their bootstrap intervals, when each step began running, the finished hero's throughput, the training-dynamics
envelopes (report.json's charts, report.html's section in chromium, the dashboard's MoE view)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ladder.dashboard.data import Root
from ladder.outputs import layout, readers

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "experiments" / "smoke.py")


@pytest.fixture(scope="module")
def root(ladder_smoke_root, tmp_path_factory) -> Path:
    """A copy of the suite's smoke ladder (the report rewrites its own folder; the shared one stays as it was)."""
    copy = tmp_path_factory.mktemp("agree") / "root"
    shutil.copytree(ladder_smoke_root, copy, ignore=shutil.ignore_patterns("checkpoints*", "wandb"))
    return copy


@pytest.fixture(scope="module")
def report(root) -> dict:
    from ladder.cli.main import main

    r = CliRunner().invoke(main, ["report", SMOKE, "--root", str(root), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _dir(root: Path, step: str) -> Path:
    return next((root / "smoke").glob(f"{step}-*"))


def test_band_exits_agree(root, report):
    hero = Root(root).hero("smoke")
    view = hero["comparisons"]["hero"]
    doc = report["hero"]["comparison"]
    # the same points judged, from the same start: 10% of the hero's run
    total = layout.read_json(_dir(root, "hero") / layout.RESULT)["total_steps"]
    assert doc["from_step"] == view["summary"]["first_step"] >= readers.COMPARE_FROM_FRAC * total
    assert doc["points"] == view["summary"]["points"] and doc["outside_band"] == view["summary"]["outside"] == len(hero["exits"])
    assert doc["fraction_inside_band"] == pytest.approx(view["summary"]["fraction_inside"])
    assert report["hero"]["curve_fraction_inside_band"] == pytest.approx(doc["fraction_inside_band"])
    assert doc["band_exits"] == view["stretches"]
    # on the hero's eval points (the forecast's final is an eval loss; the train loss's noise is no news)
    evals = {r["step"]: r["eval_loss"] for r in layout.iter_jsonl(_dir(root, "hero") / layout.EVAL)}
    assert all(evals[s] == pytest.approx(y) for s, y in zip(view["points"]["step"], view["points"]["loss"], strict=True))
    assert len(view["points"]["step"]) >= 2
    # and the report's curve.csv is the same table
    curve = list(_read_csv(_dir(root, "report") / "curve.csv"))
    assert [int(float(r["step"])) for r in curve] == view["points"]["step"]
    assert sum(r["inside"] == "False" for r in curve) == doc["outside_band"]


def test_report_json_carries_each_snapshot_curve_of_the_trained_hero(root, report):
    snaps = report["hero"]["snapshots"]
    assert snaps
    per_step = layout.read_json(_dir(root, "hero") / layout.RESULT)
    per_step = per_step["tokens"] / per_step["steps"]
    for s in snaps:
        curve = s["curve"]
        assert set(curve[0]) == {"tokens", "loss", "lower", "upper"}
        assert curve[0]["tokens"] >= s["at_step"] * per_step - 1  # the rest of the run, in tokens
        assert all(c["lower"] <= c["loss"] <= c["upper"] for c in curve)


def test_text_report_accounts_for_every_exit(report):
    from ladder.report.build import report_lines

    exits = report["hero"]["band_exits"]
    lines = [line for line in report_lines(report) if "left the band" in line]
    sides = [s for s in ("above", "below") if any(e["side"] == s for e in exits)]
    assert len(lines) == len(sides)  # one line a side, however many stretches
    for side, line in zip(sides, lines, strict=True):
        mine = [e for e in exits if e["side"] == side]
        assert f"left the band {side}: {len(mine)} stretch" in line
        assert f"largest gap {max(e['max_gap'] for e in mine):.4f}" in line


def _read_csv(path: Path):
    import csv

    with path.open() as fh:
        yield from csv.DictReader(fh)


def test_fit_parameters_carry_their_bootstrap_intervals(root, report):
    params = Root(root).fit("smoke")["params"]
    assert params == report["fit_params"]
    fit = layout.read_json(_dir(root, "fit") / layout.FIT)
    assert len(fit["bootstrap_params"]) >= 5
    for p in params:
        assert p["lower"] is not None and p["upper"] is not None and p["lower"] <= p["upper"], p
        assert p["level"] == fit["summary"]["level"]
    assert any(p["upper"] > p["lower"] for p in params)  # a real spread, not the point estimate twice


def test_overview_start_is_when_training_began(root):
    steps = {s["name"]: s for s in Root(root).overview("smoke")["steps"]}
    for name in ("rung_1", "rung_2", "rung_3", "rung_4", "hero"):
        d = _dir(root, name)
        progress, status = layout.read_json(d / layout.PROGRESS), layout.read_json(d / layout.STATUS)
        assert steps[name]["start"] == progress["started"] >= status["start"]  # began running, not queued
        assert steps[name]["queued"] == status["start"]
    # the rungs queued together do not all read as starting together
    assert len({steps[f"rung_{i}"]["start"] for i in range(1, 5)}) == 4


def test_finished_hero_throughput_is_the_runs(root):
    d = _dir(root, "hero")
    result, progress = layout.read_json(d / layout.RESULT), layout.read_json(d / layout.PROGRESS)
    hero = next(s for s in Root(root).overview("smoke")["steps"] if s["name"] == "hero")
    assert hero["tokens_per_s"] == pytest.approx(result["tokens_per_s"])
    last_interval = float(layout.read_jsonl(d / layout.METRICS)["tokens_per_s"].iloc[-1])
    assert result["tokens_per_s"] != pytest.approx(last_interval, rel=1e-6)  # not the last logging interval
    # The progress a running step shows (its ETA's rate) is the run's mean so far, the same at the end.
    assert progress["tokens_per_s"] == pytest.approx(result["tokens_per_s"], rel=1e-6)


def test_report_html_states_the_same_numbers(root, report):
    html = (_dir(root, "report") / layout.REPORT_HTML).read_text()
    doc = report["hero"]["comparison"]
    assert f"Where the actual left our band ({len(doc['band_exits'])} stretches)" in html
    assert f"{doc['fraction_inside_band']:.1%}" in html and f"{doc['mean_abs_rel_error']:.2%}" in html
    for p in report["fit_params"]:
        assert format(p["lower"], ".5g") in html and format(p["upper"], ".5g") in html


def test_dynamics_charts_in_report_json(report):
    """Each tracked metric's chart: the rungs' trajectories, the hero's envelope per tenth and its steps;
    the upper-only ones (drop rate, load max/mean) from their floor."""
    from ladder.analysis.dynamics import METRICS

    dyn = report["dynamics"]
    charts = {c["metric"]: c for c in dyn["charts"]}
    assert set(charts) == set(METRICS)
    for metric, floor in (("drop_rate", 0.0), ("expert_load_max_over_mean", 1.0)):
        c = charts[metric]
        assert c["upper_only"] and c["envelope"]
        assert all(e["lower"] == floor and e["upper"] > e["centre"] > 0 for e in c["envelope"]), c["envelope"]
    for metric in ("grad_norm", "router_bias_norm"):
        assert not charts[metric]["upper_only"]
        assert all(0 < e["lower"] < e["centre"] < e["upper"] for e in charts[metric]["envelope"])
    for c in charts.values():
        assert [r["name"] for r in c["rungs"]] == ["rung_1", "rung_2", "rung_3", "rung_4"]
        assert c["hero"]["step"] and all(0 < f <= 1 for f in c["hero"]["frac"]) and all(v > 0 for v in c["hero"]["value"])


def test_dashboard_envelopes_are_the_reports(root, report):
    """The MoE page's envelopes and the hero's share inside are the report's (one definition)."""
    view = Root(root).moe("smoke")["dynamics"]
    total = layout.read_json(_dir(root, "hero") / layout.RESULT)["total_steps"]
    assert view["hero"] == "hero" and view["total_steps"] == total and view["level"] == report["dynamics"]["level"]
    hero = {h["metric"]: h for h in report["dynamics"]["hero"]}
    for c in report["dynamics"]["charts"]:
        mine = view["metrics"][c["metric"]]
        for a, b in zip(mine["envelope"], c["envelope"], strict=True):
            assert a == pytest.approx(b, rel=1e-9)
        assert mine["points"] == hero[c["metric"]]["points"]
        assert mine["inside"] == pytest.approx(hero[c["metric"]]["inside"])
        assert len(mine["outside"]["step"]) == round(mine["points"] * (1 - mine["inside"]))


async def _figures(b, sid, events):
    return await b._evaluate(sid, events, """(() => ({
        figs: Object.fromEntries([...document.querySelectorAll('.js-plotly-plot')].map((el) =>
            [el.id, el.data.map((t) => t.name)])),
        layouts: Object.fromEntries([...document.querySelectorAll('.js-plotly-plot')].map((el) =>
            [el.id, el.layout.yaxis.type])),
        section: (document.getElementById('dynamics') || {}).innerText || ''}))()""")


def test_report_html_draws_the_dynamics_envelopes(root, report, browser, screenshot_dir):
    from ladder.report.dynamics import fig_id

    html = _dir(root, "report") / layout.REPORT_HTML
    assert "<section id='dynamics'><h2>Training dynamics: the hero against its rungs&#x27; envelopes</h2>" in html.read_text()
    out = browser.check_page(html.as_uri(), "report", screenshot_dir / "report_smoke_dynamics.png", then=_figures)
    assert out["errors"] == [], out["errors"]
    facts = out["extra"]
    dyn = report["dynamics"]
    hero = {h["metric"]: h for h in dyn["hero"]}
    for c in dyn["charts"]:
        names = facts["figs"][fig_id(c["metric"])]
        assert {"rung_1", "rung_2", "rung_3", "rung_4", "hero"} <= set(names), names
        envelope = [n for n in names if n.startswith("hero's envelope")]
        assert envelope and all(("upper bound" in n) == c["upper_only"] for n in envelope), names
        assert any(n.startswith("envelope centre") for n in names)
        h = hero[c["metric"]]
        missed = round(h["points"] * (1 - h["inside"]))
        assert (f"hero outside the envelope ({missed})" in names) == (missed > 0), names
        assert facts["layouts"][fig_id(c["metric"])] == ("linear" if c["upper_only"] else "log")
        assert f"{h['inside']:.0%} of {h['points']} steps inside" in facts["section"]
    for b in dyn["backtests"]:
        assert f"backtest: {b['predict']} from {', '.join(b['fit_on'])}: {b['inside']:.0%} of {b['points']} steps" in facts["section"]
