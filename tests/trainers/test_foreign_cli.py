"""A foreign trainer through the command line (in this process: no Ray), its trainer a real child process:
bad input refused at plan time (one line, exit 2, nothing written), a trainer that fails at run time
reported in one line, the step's hash following the trainer's declared code, `ladder train` of a foreign
run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from ladder.cli.main import main

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SPEC = str(HERE / "foreign_ladder.py")


def cli(*args: str) -> SimpleNamespace:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


BAD = [
    pytest.param(["--set", "trainer.command=('{python}', 'bigram_trainer.py', '--config', '{confg}')"],
                 "trainer.command[3]: unknown placeholder {confg}", id="unknown-placeholder"),
    pytest.param(["--set", "trainer.env={'BIGRAM_FAULT': '{seeed}'}"], "trainer.env[BIGRAM_FAULT]: unknown placeholder {seeed}",
                 id="unknown-placeholder-in-env"),
    pytest.param(["--set", "trainer.code=('bigram_trainer.py', 'no_such_model.py')"],
                 "trainer.code[1]: no_such_model.py does not exist", id="missing-code-file"),
    pytest.param(["--set", "trainer.command=('no-such-trainer-56', '--config', '{config}')"],
                 "trainer.command[0]: 'no-such-trainer-56': command not found on PATH", id="command-not-found"),
    pytest.param(["--set", "trainer.kind=callable", "--set", "trainer.command=()",
                  "--set", "trainer.function=no_such_module_56:train"],
                 "trainer.function: cannot load no_such_module_56:train: ModuleNotFoundError", id="callable-not-importable"),
    pytest.param(["--set", "trainer.kind=torchrun"], "trainer.kind: 'torchrun' is not one of builtin, command, callable",
                 id="unknown-kind"),
]


# plan for each; submit and train (whose runs would start a trainer) for the ones their checks could miss
CASES = [pytest.param("plan", *p.values, id=f"plan-{p.id}") for p in BAD]
CASES += [pytest.param(c, *BAD[i].values, id=f"{c}-{BAD[i].id}") for c in ("submit", "train") for i in (0, 3)]


@pytest.mark.parametrize(("command", "sets", "line"), CASES)
def test_bad_trainer_input_is_one_line_exit_2_and_nothing_written(tmp_path, command, sets, line):
    root = tmp_path / "runs"
    args = [command, SPEC, *(["rung_1"] if command == "train" else []), "--root", str(root), *sets]
    proc = cli(*args)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _lines(proc.stderr) == [_lines(proc.stderr)[0]] and line in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not root.exists() or not any(root.rglob("*")), sorted(root.rglob("*"))


FAULTS = [
    pytest.param("exit3", "its trainer exited with status 3: bigram: a fault asked for at step 3 | "
                          "bigram: exiting with status 3", id="non-zero-exit"),
    pytest.param("no_final", "the trainer exited 0 without a final eval row", id="exit-0-without-final-eval"),
    pytest.param("bad_row", "metrics.jsonl:1: a row that is not a JSON object", id="metrics-row-not-json"),
]


@pytest.mark.parametrize(("fault", "line"), FAULTS)
def test_a_failing_trainer_fails_its_run_in_one_line(tmp_path, fault, line):
    root = tmp_path / "runs"
    proc = cli("train", SPEC, "rung_1", "--root", str(root), "--set", f"trainer.env={{'BIGRAM_FAULT': '{fault}'}}")
    assert (root / "foreign" / "train-rung_1" / "trainer.log").exists()
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    failed = [ln for ln in _lines(proc.stderr) if ln.startswith("train: rung_1 FAILED: ")]
    assert len(failed) == 1 and line in failed[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not (root / "foreign" / "train-rung_1" / "result.json").exists()


def test_ladder_train_runs_a_foreign_trainer_to_its_result(tmp_path):
    root = tmp_path / "runs"
    proc = cli("train", SPEC, "rung_1", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = root / "foreign" / "train-rung_1"
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "SUCCESS" and result["trainer"]["kind"] == "command"
    assert result["trainer"]["argv"][1:3] == ["bigram_trainer.py", "--config"]
    evals = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
    final = json.loads((out / "final_eval.json").read_text())
    assert result["final_eval_loss"] == final["eval_loss"] and result["final_sample_eval_loss"] == evals[-1]["eval_loss"]
    # the bigram model learned: its held-out loss fell from ln 256 at the start
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] < 5.545
    run = json.loads((out / "run.json").read_text())
    assert run["out_dir"] == str(out) and run["resume"] is False


def test_the_step_hash_follows_the_trainer_code_env_and_command(tmp_path):
    """A declared code file's content is hashed, as are the command and its env: editing any makes new steps."""
    work = tmp_path / "spec"
    shutil.copytree(HERE, work, ignore=shutil.ignore_patterns("__pycache__", "test_*"))
    # the copies still read the repository's writer and text: only the trainer's own bytes change below
    for name, old in (("bigram_trainer.py", "Path(__file__).resolve().parents[2]"), ("foreign_ladder.py", "HERE.parents[1]")):
        (work / name).write_text((work / name).read_text().replace(old, f"Path({str(REPO)!r})"))

    def hashes(*sets: str) -> dict[str, str]:
        proc = cli("plan", str(work / "foreign_ladder.py"), "--root", str(tmp_path / "runs"), "--json", *sets)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return {s["step"]: s["hash"] for s in json.loads(proc.stdout)["steps"]}

    before = hashes()
    (work / "bigram_trainer.py").write_text((work / "bigram_trainer.py").read_text() + "\n# a changed trainer\n")
    edited = hashes()
    assert all(edited[s] != before[s] for s in ("rung_1", "rung_2", "rung_3", "hero")), (before, edited)
    assert hashes("--set", "trainer.env={'OMP_NUM_THREADS': '2'}")["rung_1"] not in (before["rung_1"], edited["rung_1"])
    command = "trainer.command=('{python}', 'bigram_trainer.py', '--config', '{config}', '--quiet')"
    assert hashes("--set", command)["rung_1"] not in (before["rung_1"], edited["rung_1"])


def test_plan_shows_each_runs_trainer_and_command_line(tmp_path):
    root = tmp_path / "runs"
    proc = cli("plan", SPEC, "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    steps = {s["step"]: s for s in json.loads(proc.stdout)["steps"]}
    rung = steps["rung_1"]
    assert rung["trainer"] == "command"
    assert rung["argv"][1:] == ["bigram_trainer.py", "--config", f"{rung['path']}/run.json"]
    assert steps["hero"]["trainer"] == "callable" and steps["hero"]["function"] == "bigram_trainer:train"
    assert "trainer" not in steps["fit"]
    text = cli("plan", SPEC, "--root", str(root)).stdout
    assert f"rung_1   command  {rung['argv'][0]} bigram_trainer.py --config {rung['path']}/run.json" in text, text
    assert "hero     callable bigram_trainer:train" in text
    assert not root.exists()
