"""ladder.analysis.beside: a function run in a second process while the caller works, its result or
its error brought back; inline on a one-core machine. The fit step's use of it (the whole-curve law
beside the bootstrap) is checked end to end by the smoke ladder's fit tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ladder.analysis.beside import ChildFailed, beside

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a second core")
def test_runs_in_another_process_and_returns_its_value():
    with beside(os.getpid) as result:
        mine = os.getpid()
    assert result() != mine
    with beside(sorted, [3, 1, 2]) as result:
        pass
    assert result() == [1, 2, 3]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a second core")
def test_an_error_in_the_child_comes_back_with_its_traceback():
    with beside(json.loads, "{not json") as result, pytest.raises(ChildFailed, match="JSONDecodeError"):
        result()


def test_one_core_runs_it_inline():
    code = ("import os, json; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))});"
            "from ladder.analysis.beside import beside\n"
            "with beside(os.getpid) as r: pass\n"
            "print(json.dumps([r(), os.getpid()]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    child, me = json.loads(out.stdout)
    assert child == me
