"""A bad task (data.tasks) is one line naming the file and line and the fix, exit 2, nothing written."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from ladder.cli.main import main

GOOD = {"context": "The cat sat on the", "choices": [" mat", " moon"], "answer": 0}
SPEC = textwrap.dedent("""
    from ladder.spec import *
    M = ModelSpec(d_model=32, n_layers=2, n_heads=2)
    RUNGS = tuple(RungSpec(name=f"rung_{{i}}", model=M, tokens=100_000, batch_size=8, seq_len=64) for i in (1, 2, 3))
    LADDER = LadderSpec(name="x", rungs=RUNGS, data=DataSpec(tasks=(TaskSpec("t", {source!r}),)))
    """)

# (the third line of the task file, what the one line must say)
BAD_ROWS = [
    ("{not json", "tasks.jsonl:3: not valid JSON"),
    (json.dumps([1, 2]), "tasks.jsonl:3: expected a JSON object"),
    (json.dumps({**GOOD, "context": 7}), "tasks.jsonl:3: 'context' must be a string"),
    (json.dumps({**GOOD, "choices": [" mat"]}), "tasks.jsonl:3: 'choices' must be a list of two or more"),
    (json.dumps({**GOOD, "choices": [" mat", ""]}), "tasks.jsonl:3: 'choices' must be a list of two or more"),
    (json.dumps({**GOOD, "answer": 2}), "tasks.jsonl:3: 'answer' must be an index 0..1"),
    (json.dumps({**GOOD, "answer": True}), "tasks.jsonl:3: 'answer' must be an index 0..1"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "answer"}), "tasks.jsonl:3: 'answer' must be an index"),
]


def _plan(tmp_path, source: str) -> tuple[int, str]:
    exp = tmp_path / "exp.py"
    exp.write_text(SPEC.format(source=source))
    root = tmp_path / "root"
    result = CliRunner().invoke(main, ["plan", str(exp), "--root", str(root)], catch_exceptions=False)
    assert not root.exists()
    return result.exit_code, result.stderr


@pytest.mark.parametrize("row,needle", BAD_ROWS, ids=[b[1].split(": ", 1)[1][:30] for b in BAD_ROWS])
def test_a_malformed_task_row_is_one_line_naming_file_and_line(tmp_path, row, needle):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join([json.dumps(GOOD), "", row, json.dumps(GOOD)]) + "\n")
    code, err = _plan(tmp_path, str(tasks))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: data.tasks[0].source: ") and needle in lines[0]
    assert '{"context": str' in lines[0]  # the fix: what a line must hold
    assert "Traceback" not in err


@pytest.mark.parametrize("source,needle", [
    ("builtin:nonesuch", "data.tasks[0].source: 'builtin:nonesuch' is not one of builtin:heldout_cloze"),
    ("no/such/tasks.jsonl", "data.tasks[0].source: no/such/tasks.jsonl does not exist"),
])
def test_an_unknown_task_source_is_one_line(tmp_path, source, needle):
    code, err = _plan(tmp_path, source)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {needle}"), err


def test_a_good_task_file_plans(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(GOOD) + "\n")
    exp = tmp_path / "exp.py"
    exp.write_text(SPEC.format(source=str(tasks)))
    result = CliRunner().invoke(main, ["plan", str(exp), "--root", str(tmp_path / "root")], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
