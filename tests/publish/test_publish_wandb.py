"""W&B both ways, with the real wandb library offline (there is no network here):
the trainer callback and the ladder-level run write under the ladder root, nothing goes to home;
`ladder import-wandb` reads recorded export CSVs; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from patience import HANG_S
from wandb_history import read_wandb_history

from ladder.dashboard.data import Root
from ladder.outputs import layout
from ladder.wandb import log as wandb_log

DATA = Path(__file__).parent / "data"


def _flush_wandb() -> None:
    """finish() returns before wandb-core has written every record; its teardown flushes them
    (a process that exits, as a Ray worker does, flushes the same way)."""
    import wandb

    wandb.teardown()


def test_mode_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert wandb_log.resolve_mode(None, "auto") == "offline"  # no key: offline
    assert wandb_log.resolve_mode("disabled", "online") == "disabled"  # --wandb disabled wins
    (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password abc123\n")
    assert wandb_log.resolve_mode(None, "auto") == "online"  # logged in: online
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_log.resolve_mode(None, "auto") == "offline"  # the environment steers auto
    assert wandb_log.resolve_mode(None, "online") == "online"  # an explicit spec mode wins over it
    assert wandb_log.resolve_mode("online", "offline") == "online"
    with pytest.raises(ValueError):
        wandb_log.resolve_mode("sometimes", None)


def test_disabled_makes_no_callback(tmp_path):
    from ladder.spec import LadderSpec, WandbSpec

    spec = LadderSpec(name="x", rungs=(), wandb=WandbSpec(mode="disabled"), root=str(tmp_path))
    assert wandb_log.make_callback(spec, "rung_1") is None

    class Ctx:
        root, ladder, name, hash, out_dir = str(tmp_path), "x", "rung_1", "abc", str(tmp_path / "x" / "rung_1-abc")
        runtime = {"wandb_mode": "disabled"}

    assert wandb_log.training_callbacks({"ladder": "x", "rung": {"name": "rung_1"}}, Ctx()) == []
    assert not (tmp_path / "x" / "wandb").exists()


def test_callback_logs_offline_under_the_root(tmp_path):
    """The trainer's calls, a real offline wandb run, files under <root>/<ladder>/wandb, history readable."""
    class Ctx:
        root, ladder, name, hash = str(tmp_path), "lad", "rung_1", "f00d"
        out_dir = str(tmp_path / "lad" / "rung_1-f00d")
        runtime = {"wandb_mode": "offline"}

    config = {"role": "rung", "ladder": "lad", "rung": {"name": "rung_1", "tokens": 1000}, "wandb": {"mode": "auto"}}
    (cb,) = wandb_log.training_callbacks(config, Ctx())
    import pickle

    cb = pickle.loads(pickle.dumps(cb))  # built in the driver, shipped to a Ray worker
    for step in range(1, 21):
        cb.on_step(step, {"step": step, "tokens": step * 64, "loss": 5.0 - 0.1 * step, "lr": 1e-3,
                          "router_bias_norm_l0": 0.01 * step, "note": "not a number"})
        if step % 10 == 0:
            cb.on_eval(step, {"step": step, "tokens": step * 64, "eval_loss": 4.9 - 0.1 * step,
                              "eval_loss/code": 4.0, "bpb": 1.2})
    cb.on_checkpoint(20)
    cb.on_end({"status": "SUCCESS", "final_eval_loss": 3.0, "tokens": 1280})
    _flush_wandb()
    runs = list((tmp_path / "lad" / "wandb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    (wandb_file,) = runs[0].glob("run-*.wandb")
    assert wandb_file.name == f"run-{wandb_log.run_id('lad', 'rung_1', 'f00d')}.wandb"
    rows = read_wandb_history(wandb_file)
    losses = [r["train/loss"] for r in rows if "train/loss" in r]
    assert len(losses) == 20 and losses[0] == pytest.approx(4.9), [(r.get("_step"), sorted(r)) for r in rows]
    evals = [r for r in rows if "eval_loss" in r]
    assert [r["_step"] for r in evals] == [10, 20] and evals[0]["eval_loss/code"] == 4.0
    assert all("note" not in r for r in rows)


def test_ladder_run_logs_tables_offline(sample_root, tmp_path):
    import shutil

    root = tmp_path / "root"
    shutil.copytree(sample_root, root)
    out = wandb_log.log_ladder_run(root, "demo", mode="offline")
    _flush_wandb()
    assert out is not None and Path(out).is_relative_to(root / "demo" / "wandb")
    (wandb_file,) = (root / "demo" / "wandb" / "wandb").glob("offline-run-*/run-*.wandb")
    rows = read_wandb_history(wandb_file)
    row = rows[0]  # media are logged as nested records: <key>/_type, <key>/path ...
    for key in ("fit/runs", "fit/params", "fit/backtest", "fit/law_curve", "predict/hero_curve", "predict/targets",
                "hero/forecasts"):
        assert row[f"{key}/_type"] == "table-file", key
        assert (Path(out) / row[f"{key}/path"]).is_file(), key
    assert row["fit/runs/nrows"] == 4 and row["fit/loss_vs_compute/_type"] == "plotly-file"

    class Ctx:  # what ladder.dag.step_fns hands a fit/predict/report step
        ladder, name, hash, runtime = "demo", "report", "abc", {"wandb_mode": "disabled"}
        out_dir = str(root / "demo" / "report-abc")

    Ctx.root = str(root)
    assert wandb_log.log_ladder_step({"ladder": "demo"}, Ctx()) is None  # --wandb disabled: nothing


def test_nothing_goes_to_home(tmp_path):
    """A clean process (no WANDB_* set, HOME in tmp): every W&B file lands under the ladder root."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "XDG_"))}
    env.update(HOME=str(home), WANDB_SILENT="true")
    code = textwrap.dedent(f"""
        from ladder.wandb.log import WandbCallback
        cb = WandbCallback(root={str(tmp_path / 'root')!r}, ladder="lad", step_name="hero", mode="offline")
        for s in range(5):
            cb.on_step(s, {{"loss": 1.0 / (s + 1)}})
        cb.on_end({{"status": "SUCCESS"}})
    """)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=HANG_S, cwd=tmp_path)
    assert list((tmp_path / "root" / "lad" / "wandb" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert [p for p in home.rglob("*")] == []
    assert not (tmp_path / "wandb").exists()


# ------------------------------------------------------------------------------------------
# import-wandb


def _cli(args):
    from ladder.cli.main import main

    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_import_history_export(sample_root, tmp_path):
    import shutil

    root = tmp_path / "root"
    shutil.copytree(sample_root, root)
    r = _cli(["import-wandb", "marin-community/marin_moe/abc123", "--as", "marin_100m",
              "--from-csv", str(DATA / "wandb_history_export.csv"), "--root", str(root)])
    assert r.exit_code == 0, r.output
    out = root / "demo" / "imported" / "marin_100m"
    rows = list(layout.iter_jsonl(out / layout.METRICS))
    assert len(rows) == 171 and rows[0]["step"] == 2160 and rows[0]["loss"] == pytest.approx(3.7755)
    assert rows[0]["tokens"] == 2160 * 524288 and "system/gpu.0.memory" not in rows[0]
    assert sum("eval_loss" in r for r in rows) == 17 and "eval/paloma/c4_en/loss" in rows[9]
    meta = layout.read_json(out / "meta.json")
    assert meta["run_path"] == "marin-community/marin_moe/abc123" and meta["source"] == "csv"
    # the dashboard overlays it
    hero = Root(root).hero("demo")
    assert hero["imported"][0]["name"] == "marin_100m" and len(hero["imported"][0]["loss"]) == 171
    assert "imported.marin_100m" in {t["name"] for t in Root(root).tables("demo")}


def test_import_chart_export_with_keys(tmp_path):
    (tmp_path / "lad").mkdir()
    r = _cli(["import-wandb", "https://wandb.ai/ent/proj/runs/r1", "--as", "ref", "--keys", "train/loss=loss",
              "--from-csv", str(DATA / "wandb_chart_export.csv"), "--root", str(tmp_path), "--ladder", "lad"])
    assert r.exit_code == 0, r.output
    rows = list(layout.iter_jsonl(tmp_path / "lad" / "imported" / "ref" / layout.METRICS))
    assert len(rows) == 60 and set(rows[0]) == {"step", "loss"}


@pytest.mark.parametrize("args,needle", [
    (["not-a-path", "--as", "x"], "ENTITY/PROJECT/RUN_ID"),
    (["e/p/r", "--as", "../evil"], "--as"),
    (["e/p/r", "--as", "x", "--from-csv", "/nonexistent.csv"], "no such file"),
    (["e/p/r", "--as", "x", "--from-csv", "CHART", "--keys", "nope/loss"], "no key 'nope/loss'"),
    (["e/p/r", "--as", "x", "--from-csv", "NOSTEP"], "no step column"),
    (["e/p/r", "--as", "x"], "no W&B API key"),
    (["e/p/r", "--as", "x", "--root", "/nonexistent-root"], "no such folder"),
])
def test_import_bad_input_one_line_exit_2(tmp_path, monkeypatch, args, needle):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    (tmp_path / "lad").mkdir()
    nostep = tmp_path / "nostep.csv"
    nostep.write_text("train/loss\n3.0\n")
    args = [str(DATA / "wandb_chart_export.csv") if a == "CHART" else str(nostep) if a == "NOSTEP" else a for a in args]
    if "--root" not in args:
        args += ["--root", str(tmp_path)]
    r = CliRunner().invoke(__import__("ladder.cli.main", fromlist=["main"]).main, ["import-wandb", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.output
    assert not (tmp_path / "lad" / "imported").exists()


def test_dashboard_command(sample_root, tmp_path):
    """`ladder dashboard --port 0` serves; a missing root is one line and exit 2."""
    import urllib.request

    r = _cli(["dashboard", "--root", str(tmp_path / "missing")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "no such folder" in r.output
    exe = Path(sys.executable).with_name("ladder")
    proc = subprocess.Popen([str(exe), "dashboard", "--root", str(sample_root), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split(" at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "api/ladders", timeout=10) as resp:
            assert json.loads(resp.read())["ladders"][0]["name"] == "demo"
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_S)
