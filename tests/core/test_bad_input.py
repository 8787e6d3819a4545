"""Bad input: one line on stderr naming the field or file and the fix, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from patience import HANG_S

from ladder.cli.main import main

REPO = Path(__file__).resolve().parents[2]

BASE = textwrap.dedent("""
    from ladder.spec import *
    M = ModelSpec(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_d_ff=32)
    def rung(i, **kw):
        args = dict(name=f"rung_{i}", model=M, tokens=100_000, batch_size=8, seq_len=64)
        args.update(kw)
        return RungSpec(**args)
    RUNGS = tuple(rung(i) for i in range(1, 5))
    HERO = rung(9, name="hero", tokens=400_000)
    """)

# (experiment body after BASE, overrides, the field the one line must name)
BAD_SPECS = [
    ("LADDER = LadderSpec(name='x', rungs=(rung(1, model=ModelSpec(d_model=32, n_layers=2, n_heads=2, n_experts=8, "
     "top_k=9, expert_d_ff=8)),) + RUNGS[1:], hero=HERO)",
     [], "rungs[0].model.top_k: 9 exceeds n_experts 8"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[1].tokens=-3"], "rungs[1].tokens:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].model.n_heads=3"], "rungs[0].model.n_heads:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["hero.optim.lr=0"], "hero.optim.lr:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[2].schedule.kind='triangle'"], "rungs[2].schedule.kind:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].model.balancing='magic'"], "rungs[0].model.balancing:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["data.domains[0].source='/no/such/corpus.txt'"], "data.domains[0].source:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.level=1.5"], "fit.level:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.law='kaplan'"], "fit.law:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.law='compute_domains'", "fit.pin_E=0.5"],
     "fit.pin_E: the compute_domains law fits each domain's own E"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.E_prior=(0.6, -0.2)"],
     "fit.E_prior: (0.6, -0.2) is not a (mean, sd) pair of positive numbers"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.disagreement='ignore'"],
     "fit.disagreement"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.law='chinchilla'", "fit.E_prior=(0.6, 0.2)"],
     "fit.E_prior: a prior on the compute law's E, but fit.law is 'chinchilla'"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.loss_metric='train_loss'"],
     "fit.loss_metric: 'train_loss' is not supported"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.loss_metric='bpb'"], "fit.loss_metric: 'bpb' is not one of eval_loss"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["fit.backtest_holdout=2"],
     "fit.backtest_holdout: 2 is not supported"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["wandb.mode='loud'"], "wandb.mode:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["gate.backtest_rule='vibes'"],
     "gate.backtest_rule: 'vibes' is not one of noise, threshold"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].batch_size=10000"], "rungs[0].tokens:"),
    ("LADDER = LadderSpec(name='x', rungs=(RUNGS[0], RUNGS[0], RUNGS[2], RUNGS[3]), hero=HERO)", [], "rungs[1].name: duplicate"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS[:2], hero=HERO)", [], "rungs: the compute law needs at least 3"),
    ("LADDER = LadderSpec(name='bad name!', rungs=RUNGS, hero=HERO)", [], "name:"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].nonsense=1"], "has no field 'nonsense'"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[9].tokens=1"], "index 9 is out of range"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["seed"], "expected key=value"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].model.d_model='wide'"],
     "rungs[0].model.d_model: expected a positive integer"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].schedule.decay_frac=0.99", "rungs[0].schedule.warmup_frac=0.5"],
     "rungs[0].schedule: warmup_frac + decay_frac exceed 1"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["rungs[0].resources.devices=3"],
     "rungs[0].resources.devices: batch_size 8 does not split over 3 devices"),
    ("LADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)", ["hero.resources.parallel='zero3'"],
     "hero.resources.parallel: 'zero3' is not one of replicated, fsdp"),
    ("LADDER = 3", [], "LADDER is a int"),
    ("X = 1", [], "defines no LADDER"),
    ("raise RuntimeError('boom')", [], "failed to import: RuntimeError: boom"),
]


def _run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("body,overrides,needle", BAD_SPECS, ids=[b[2][:40] for b in BAD_SPECS])
def test_bad_spec_gives_one_line_and_exit_2(tmp_path, body, overrides, needle):
    exp = tmp_path / "exp.py"
    exp.write_text(BASE + "\n" + body + "\n")
    root = tmp_path / "root"
    args = ["plan", str(exp), "--root", str(root)]
    for o in overrides:
        args += ["--set", o]
    code, out, err = _run(args)
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0]
    assert "Traceback" not in err
    assert not root.exists()


@pytest.mark.parametrize("args,needle", [
    (["plan", "does/not/exist.py"], "no such experiment file"),
    (["plan", "README.md"], "not a Python file"),
    (["submit", "experiments/smoke.py", "--max-concurrent", "0"], "must be positive"),
    (["submit"], "Missing argument 'SPEC'"),
    (["plan", "experiments/smoke.py", "--root", "nosuch://bucket/x"], "unsupported storage URL"),
    (["plan", "experiments/smoke.py", "--root", "README.md/sub"], "is a file, not a folder"),
    (["rerun", "experiments/smoke.py", "rung_99", "--root", "{tmp}"], "no step named 'rung_99'"),
    (["train", "experiments/smoke.py", "rung_99", "--root", "{tmp}"], "no rung named 'rung_99'"),
    (["frobnicate"], "No such command"),
])
def test_bad_cli_arguments(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(REPO)
    args = [a.replace("{tmp}", str(tmp_path / "root")) for a in args]
    code, out, err = _run(args)
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("command", [["train", "rung_1"], ["submit"], ["rerun", "rung_1"], ["sweep", "--rungs", "rung_1"]])
def test_a_progress_interval_that_is_not_seconds_is_one_line(tmp_path, monkeypatch, command):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LADDER_PROGRESS_INTERVAL", "soon")
    args = [command[0], "experiments/smoke.py", *command[1:], "--root", str(tmp_path / "root")]
    code, out, err = _run(args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "LADDER_PROGRESS_INTERVAL: 'soon' is not a number of seconds" in lines[0], err
    assert not (tmp_path / "root").exists()


def test_console_script_exits_2_without_traceback(tmp_path):
    exp = tmp_path / "exp.py"
    exp.write_text(BASE + "\nLADDER = LadderSpec(name='x', rungs=RUNGS, hero=HERO)\n")
    proc = subprocess.run([str(Path(sys.executable).parent / "ladder"), "plan", str(exp), "--set", "rungs[3].model.top_k=5"],
                          capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: rungs[3].model.top_k: 5 exceeds n_experts 4"
