"""One CLI convention across `ladder`: an example in every --help, --json that parses (one shape
per command), `status --check`, one rule for the root, one default level, every environment
variable declared and documented. Runs nothing heavy: plans and dry runs of the smoke ladder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from patience import HANG_S

from ladder.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "experiments" / "smoke.py")


def run(args, env=None):
    r = CliRunner().invoke(main, args, env=env)
    return r.exit_code, r.stdout, r.stderr


def test_every_command_has_an_example_in_its_help():
    code, out, _ = run(["--help"])
    assert code == 0 and "Examples:" in out and "_LADDER_COMPLETE" in out  # shell completion, documented
    assert len(main.commands) >= 17
    for name in main.commands:
        code, out, err = run([name, "--help"])
        assert code == 0, (name, err)
        examples = out.split("Examples:", 1)
        assert len(examples) == 2, f"`ladder {name} --help` has no example"
        assert f"ladder {name}" in examples[1], name


@pytest.mark.parametrize("args, keys", [
    (["plan", SMOKE, "--json"], {"ladder", "mfu", "chip_peak", "accelerator", "steps", "runs"}),
    (["submit", SMOKE, "--dry-run", "--json"], {"ladder", "mfu", "chip_peak", "accelerator", "steps", "runs"}),
    (["rerun", SMOKE, "rung_1", "--dry-run", "--json"], {"ladder", "mfu", "chip_peak", "accelerator", "steps", "runs"}),
    (["sweep", SMOKE, "--rungs", "rung_1,rung_2", "--dry-run", "--json"], {"ladder", "steps"}),
    (["status", SMOKE, "--json"], {"ladder", "failed", "steps", "other_configurations"}),
    (["show", SMOKE, "--json"], {"ladder", "spec", "fields"}),
    (["env", "--json"], {"variables"}),
])
def test_json_of_each_command_parses(args, keys, tmp_path):
    code, out, err = run([*args, *(["--root", str(tmp_path)] if args[0] != "env" else [])])
    assert code == 0, err
    d = json.loads(out)
    assert set(d) == keys
    if "steps" in d:
        need = {"step", "status", "path"} if args[0] == "status" else {"step", "action", "path"}
        assert d["steps"] and all(need <= set(s) for s in d["steps"])
        assert all(s["path"].startswith(str(tmp_path)) for s in d["steps"])
    if args[0] == "rerun":
        forced = {s["step"]: s for s in d["steps"]}["rung_1"]
        assert forced["action"] == "run"


def test_import_results_json(tmp_path):
    csv = tmp_path / "results.csv"
    pd.DataFrame({"name": ["rung_1", "rung_2"], "loss": [3.1, 2.9]}).to_csv(csv, index=False)
    code, out, err = run(["import-results", SMOKE, str(csv), "--root", str(tmp_path / "root"), "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["n_rows"] == 2 and d["names"] == ["rung_1", "rung_2"] and Path(d["path"]).exists()
    assert d["kind"] == "results" and d["partial"] == {}
    assert set(d) == {"ladder", "path", "kind", "n_rows", "names", "partial", "source", "skipped"}  # --from-wandb's too
    assert d["source"] == str(csv) and d["skipped"] == []


def test_status_check_exits_non_zero_when_a_step_failed(tmp_path):
    from ladder.executor.lease import write_final
    from ladder.executor.store import Store

    root = tmp_path / "root"
    code, out, _ = run(["status", SMOKE, "--root", str(root), "--check", "--json"])
    assert code == 0 and json.loads(out)["failed"] == []
    steps = {s["step"]: s for s in json.loads(run(["plan", SMOKE, "--root", str(root), "--json"])[1])["steps"]}
    store = Store(str(root))
    write_final(store, store.to_path(steps["rung_2"]["path"]), "run-x", "FAILED", error="boom")
    code, out, err = run(["status", SMOKE, "--root", str(root), "--check", "--json"])
    assert code == 1 and json.loads(out)["failed"] == ["rung_2"]
    code, out, err = run(["status", SMOKE, "--root", str(root), "--check"])
    assert code == 1 and "failed: rung_2" in err
    assert run(["status", SMOKE, "--root", str(root)])[0] == 0  # without --check: a report, not a verdict


def test_one_rule_for_the_root(tmp_path):
    def first_path(args, env=None):
        code, out, err = run(["plan", SMOKE, "--json", *args], env=env)
        assert code == 0, err
        return json.loads(out)["steps"][0]["path"]

    spec_root = first_path([])
    assert "/runs/" in spec_root or spec_root.startswith("runs/")  # the spec's own root
    env_root = str(tmp_path / "env")
    assert first_path([], env={"LADDER_ROOT": env_root}).startswith(env_root)
    flag_root = str(tmp_path / "flag")
    assert first_path(["--root", flag_root], env={"LADDER_ROOT": env_root}).startswith(flag_root)
    code, out, _ = run(["plan", "--help"])
    assert "LADDER_ROOT" in out


def test_dashboard_json_names_where_it_serves(tmp_path):
    # A real server process: --port 0 picks a free port, and the one JSON line is how a script learns it.
    import subprocess
    import sys
    import urllib.request

    (tmp_path / "root").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "ladder.cli.main", "dashboard", "--root", str(tmp_path / "root"),
                             "--port", "0", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        d = json.loads(proc.stdout.readline())
        assert set(d) == {"url", "api", "host", "port", "pid", "root"}
        assert d["pid"] == proc.pid and d["port"] > 0 and d["url"] == f"http://127.0.0.1:{d['port']}/"
        assert d["root"] == str((tmp_path / "root").resolve())
        with urllib.request.urlopen(d["api"], timeout=30) as resp:
            served = json.loads(resp.read())
        assert Path(served["root"]).resolve() == Path(d["root"]) and served["ladders"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_S)
        proc.stdout.close()
        proc.stderr.close()


def test_one_default_level():
    import fits
    from fits.hparams import fit_rule
    from fits.uncertainty import bootstrap, prediction_band
    from ladder.spec import FitSpec

    assert fits.DEFAULT_LEVEL == FitSpec().level == 0.9
    for fn in (bootstrap, prediction_band, fit_rule, fits.calibrated_interval):
        import inspect

        assert inspect.signature(fn).parameters["level"].default == fits.DEFAULT_LEVEL, fn.__name__
    for name in ("predict", "fit", "fit-rule"):
        opt = {p.name: p for p in main.commands[name].params}["level"]
        assert opt.default == fits.DEFAULT_LEVEL, name


def test_every_environment_variable_is_declared_and_in_the_readme():
    from ladder.cli.options import ENVIRONMENT

    read = set()
    for path in [*(REPO / "ladder").rglob("*.py"), *(REPO / "fits").rglob("*.py")]:
        text = path.read_text()
        read |= set(re.findall(r"environ(?:\.get)?\(\s*\"([A-Z][A-Z0-9_]+)\"", text))
        read |= set(re.findall(r"environ\[\"([A-Z][A-Z0-9_]+)\"\]", text))
        read |= set(re.findall(r"env_float\(\"([A-Z][A-Z0-9_]+)\"", text))
    assert read - set(ENVIRONMENT) == set(), "read but not declared in ladder.cli.options.ENVIRONMENT"
    page = (REPO / "docs" / "environment.md").read_text()
    missing = [k for k in ENVIRONMENT if f"`{k}`" not in page]
    assert missing == [], "docs/environment.md lacks these: run `make docs`"
