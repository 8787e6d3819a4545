"""Read commands write nothing, and import-wandb picks one metric of a CSV that holds several."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ladder.dashboard.data import Root
from ladder.outputs import layout

REPO = Path(__file__).resolve().parents[2]
HERO_EVAL = REPO / "fits" / "reference_data" / "marin_moe_535b" / "hero_eval.csv"


def _cli(args):
    from ladder.cli.main import main

    return CliRunner().invoke(main, args, catch_exceptions=False)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_report_of_a_ladder_that_never_ran(tmp_path, json_flag):
    (tmp_path / "other").mkdir()
    before = _tree(tmp_path)
    r = _cli(["report", str(REPO / "experiments" / "smoke.py"), "--root", str(tmp_path), *json_flag])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nothing to report: ladder smoke has not run under"), r.output
    assert _tree(tmp_path) == before  # no report dir, no ladder dir


def test_report_and_status_without_the_submits_set_say_so(tmp_path):
    """A ladder submitted with --set seed=7 and reported without it: the steps are there under other hashes."""
    from ladder.dag import queries
    from ladder.executor.lease import mark
    from ladder.executor.store import Store
    from ladder.spec import load_spec

    spec = dataclasses.replace(load_spec(str(REPO / "experiments" / "smoke.py"), ("seed=7",)), root=str(tmp_path))
    store = Store(str(tmp_path))
    hero_dir = store.to_path(queries.step_dirs(spec)["hero"])
    assert mark(store, hero_dir, "BLOCKED", error="gate", timeout=30.0)
    before = _tree(tmp_path)
    r = _cli(["report", str(REPO / "experiments" / "smoke.py"), "--root", str(tmp_path)])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "1 step folders" in lines[0] and Path(hero_dir).name in lines[0], r.output
    assert "--set" in lines[0]
    assert _tree(tmp_path) == before
    # ladder status says it too (after its table), and names the folder in its JSON
    r = _cli(["status", str(REPO / "experiments" / "smoke.py"), "--root", str(tmp_path)])
    assert r.exit_code == 0 and "written by another one; pass the --set" in r.output, r.output
    r = _cli(["status", str(REPO / "experiments" / "smoke.py"), "--root", str(tmp_path), "--json"])
    assert json.loads(r.output)["other_configurations"] == [Path(hero_dir).name]
    r = _cli(["status", str(REPO / "experiments" / "smoke.py"), "--root", str(tmp_path), "--set", "seed=7", "--json"])
    assert json.loads(r.output)["other_configurations"] == []  # with the submit's --set: its own steps, none other


def test_report_of_a_root_that_does_not_exist(tmp_path):
    root = tmp_path / "missing"
    r = _cli(["report", str(REPO / "experiments" / "smoke.py"), "--root", str(root)])
    assert r.exit_code == 1 and "nothing to report" in r.output
    assert not root.exists()


def test_import_one_metric_of_several(sample_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(sample_root, root)
    args = ["import-wandb", "marin-community/marin_moe/hero", "--as", "hero_actual", "--from-csv", str(HERO_EVAL),
            "--root", str(root)]
    r = _cli(args)  # two metrics in the file: the user must pick one
    assert r.exit_code == 2 and "eval_dropless/paloma/macro_loss" in r.output and "--metric" in r.output
    assert "Traceback" not in r.output and not (root / "demo" / "imported").exists()
    r = _cli([*args, "--metric", "eval_dropless/paloma/macro_lossX"])
    assert r.exit_code == 2 and "no rows of metric" in r.output
    r = _cli([*args, "--metric", "eval_dropless/paloma/macro_loss"])
    assert r.exit_code == 0, r.output
    out = root / "demo" / "imported" / "hero_actual"
    rows = list(layout.iter_jsonl(out / layout.METRICS))
    import csv

    want = [r for r in csv.DictReader(HERO_EVAL.open()) if r["metric"] == "eval_dropless/paloma/macro_loss"]
    assert len(rows) == len(want) == 37
    assert [r["step"] for r in rows] == sorted(int(w["step"]) for w in want)
    by_step = {int(w["step"]): float(w["loss"]) for w in want}
    assert all(r["loss"] == pytest.approx(by_step[r["step"]]) for r in rows)
    assert layout.read_json(out / "meta.json")["metric"] == "eval_dropless/paloma/macro_loss"
    # the dashboard shows it live: the next read of the hero view has the imported points
    hero = Root(root).hero("demo")
    assert [i["name"] for i in hero["imported"]] == ["hero_actual"] and hero["imported"][0]["n"] == 37


def test_import_a_history_column_as_the_loss(sample_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(sample_root, root)
    r = _cli(["import-wandb", "marin-community/marin_moe/abc123", "--as", "m", "--root", str(root), "--from-csv",
              str(Path(__file__).parent / "data" / "wandb_history_export.csv"), "--metric", "eval/paloma/c4_en/loss"])
    assert r.exit_code == 0, r.output
    rows = list(layout.iter_jsonl(root / "demo" / "imported" / "m" / layout.METRICS))
    assert len(rows) == 17 and all("loss" in r and "tokens" in r for r in rows)  # the rows that logged it
    assert (rows[0]["step"], rows[0]["loss"]) == (3312, pytest.approx(3.6107))
