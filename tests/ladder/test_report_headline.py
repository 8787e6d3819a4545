"""One forecast of the hero's final, and the last lines `ladder report` (so `make demo`) prints, on the
suite's shared smoke ladder: the predicted curve ends on the prediction the report heads with, the
point table's last point scores the same error, and the last line says where the hero landed against
its band and where the report is; a blocked ladder's lines say what to do next and how often it happens."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
SMOKE = str(REPO / "experiments" / "smoke.py")
LANDED = re.compile(r"^hero: (\d+\.\d{4}) against (\d+\.\d{4}) \[(\d+\.\d{4}), (\d+\.\d{4})\]: (inside|OUTSIDE) the "
                    r"(\d+)% band, error ([+-]\d+\.\d{2})%; report: (\S+report\.html)$")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=HANG_S, cwd=REPO,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})


@pytest.fixture(scope="module")
def smoke_copy(ladder_smoke_root, tmp_path_factory) -> str:
    """A copy of the suite's smoke ladder: a report rewrites its own folder, and the shared one stays as it was."""
    copy = tmp_path_factory.mktemp("headline") / "root"
    shutil.copytree(ladder_smoke_root, copy, ignore=shutil.ignore_patterns("checkpoints*", "wandb"))
    return str(copy)


def smoke_spec(root: str):
    from ladder.spec.load import load_spec

    return dataclasses.replace(load_spec(SMOKE), root=root)


def test_the_predicted_curve_ends_on_the_prediction_the_report_heads_with(smoke_copy):
    from ladder.dag import queries

    dirs = queries.step_dirs(smoke_spec(smoke_copy))
    hero = json.loads(Path(dirs["predict"], "prediction.json").read_text())["hero"]
    curve = pd.read_csv(Path(dirs["predict"], "hero_curve.csv"))
    last = curve.iloc[-1]
    assert int(last["step"]) == smoke_spec(smoke_copy).hero.steps
    for col, key in (("loss", "predicted_final_loss"), ("lower", "lower"), ("upper", "upper")):
        assert last[col] == pytest.approx(hero[key], rel=1e-12), col  # one number, written twice
    # the shape before the end is the rungs' (a train-loss curve rescaled, not flattened onto the final)
    assert curve["loss"].iloc[0] > 1.5 * last["loss"]
    assert (curve["lower"] <= curve["loss"]).all() and (curve["loss"] <= curve["upper"]).all()

    proc = run_cli("report", SMOKE, "--root", smoke_copy)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.rstrip("\n").splitlines()[-1]
    got = LANDED.match(line)
    assert got, line
    report_html = Path(got.group(8))
    rep = json.loads((report_html.parent / "report.json").read_text())["hero"]
    assert rep["predicted_final_loss"] == hero["predicted_final_loss"]
    # the point table's last point is the final: the same prediction, the same error as the headline
    table = pd.read_csv(report_html.parent / "curve.csv")
    end = table[table["step"] == table["step"].max()].iloc[0]
    assert end["predicted"] == pytest.approx(rep["predicted_final_loss"], rel=1e-12)
    assert end["rel_error"] == pytest.approx(rep["relative_error"], rel=1e-9)
    actual, centre, lower, upper = (float(got.group(i)) for i in (1, 2, 3, 4))
    assert (actual, centre, lower, upper) == tuple(round(rep[k], 4) for k in
                                                   ("actual_final_loss", "predicted_final_loss", "lower", "upper"))
    assert (got.group(5) == "inside") == rep["inside_interval"] and int(got.group(6)) == round(100 * rep["level"])
    assert float(got.group(7)) == round(100 * rep["relative_error"], 2)
    assert report_html.is_file()


def test_a_blocked_ladder_says_what_to_do_next_and_how_often(smoke_copy, tmp_path):
    """The smoke ladder's own report as the gate would leave it had a replica outlier blocked the hero."""
    from ladder.dag import queries
    from ladder.report.headline import final_lines

    spec_path = tmp_path / "smoke.py"
    shutil.copy(SMOKE, spec_path)
    spec = smoke_spec(smoke_copy)
    rep, html = queries.build_report(spec)
    hero = {**rep["hero"], "status": None, "actual_final_loss": None, "relative_error": None, "inside_interval": None}
    gate = {**rep["gate"], "passed": False, "reasons": ["rung_2 and rung_2_r1 differ"],
            "thresholds": {**rep["gate"]["thresholds"], "replica_outlier_level": 0.01}}
    outlier = {"odd_run": "rung_2", "p_family": 0.004}
    blocked = {**rep, "hero": hero, "gate": gate, "fit": {**rep["fit"], "replica_outlier": outlier}}

    lines = final_lines(blocked, html, spec, str(spec_path))
    assert len(lines) == 3 and lines[-1] == f"report: {html}"
    assert lines[0].startswith("hero: not trained, the gate BLOCKED it") and "Next: train rung_2 again" in lines[0]
    commands = re.findall(r"`([^`]+)`", lines[0])
    reseed, force = (shlex.split(c) for c in commands)
    seed = max(r.seed for r in spec.rungs) + 1
    assert reseed == ["ladder", "submit", str(spec_path), "--root", smoke_copy, "--set", f"rungs[1].seed={seed}"]
    assert force == ["ladder", "submit", str(spec_path), "--root", smoke_copy, "--force"]
    # the reseed command's override is one the CLI takes (plan: nothing runs)
    proc = run_cli("plan", *reseed[2:], "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "no draws recorded yet" in lines[1] and "smoke_draws.csv" in lines[1]

    # how often comes from the ladder's record of draws beside its spec, never from a figure in the code
    (tmp_path / "smoke_draws.csv").write_text("# draws of the smoke ladder\nseed,gate,hero_error\n"
                                              "1,passed,-0.01\n2,blocked,\n3,passed,0.004\n4,passed,0.02\n")
    lines = final_lines(blocked, html, spec, str(spec_path))
    assert "the gate blocked 1 of 4 recorded draws of this ladder (25%" in lines[1]
    # a record that says something else is bad input: one line naming the file and the fix
    from fits.errors import InputError

    (tmp_path / "smoke_draws.csv").write_text("seed,gate\n1,passed\n2,maybe\n")
    with pytest.raises(InputError, match=r"smoke_draws.csv: gate 'maybe' in column `gate`; each draw's gate is passed or blocked"):
        final_lines(blocked, html, spec, str(spec_path))
    (tmp_path / "smoke_draws.csv").write_text("# draws of the smoke ladder\nseed,gate\n")
    assert "no draws recorded yet" in final_lines(blocked, html, spec, str(spec_path))[1]

    # a backtest block (no outlier below the gate's level): --force is the one next step
    other = {**blocked, "fit": {**rep["fit"], "replica_outlier": {**outlier, "p_family": 0.2}}}
    first = final_lines(other, html, spec, str(spec_path))[0]
    assert re.findall(r"`([^`]+)`", first) == [shlex.join(force)]
