"""Bad input not covered by tests/core/test_bad_input.py (spec fields, --set, experiment files, plan/
rerun/train arguments) or tests/fits/test_cli.py (fit CSVs, predict arguments): storage URLs on the
commands that write, `ladder import-wandb` references and files, `ladder dashboard` ports and hosts,
option types. Each: one line on stderr naming the input, exit 2, nothing written.

CLI_GAPS were first found giving tracebacks; ladder/cli/main.py now turns them into one line too.
"""

from __future__ import annotations

import pytest
from conftest import TINY, run_cli
from patience import HANG_S

ROOT = "{root}"

CASES = [
    # storage URLs on the commands that write or read a ladder
    (["submit", TINY, "--root", "nosuch://bucket/x"], "unsupported storage URL"),
    (["status", TINY, "--root", "nosuch://bucket/x"], "unsupported storage URL"),
    (["rerun", TINY, "rung_1", "--root", "nosuch://bucket/x"], "unsupported storage URL"),
    # CLI arguments and option types
    (["submit", TINY, "--root", ROOT, "--max-concurrent", "abc"], "'--max-concurrent'"),
    (["submit", TINY, "--root", ROOT, "--wandb", "loud"], "'--wandb'"),
    (["rerun", TINY, "--root", ROOT], "Missing argument 'STEPS...'"),
    (["status", TINY, "--root", ROOT, "--set", "rungs[0].tokens=0"], "rungs[0].tokens"),
    (["plan", TINY, "--root", ROOT, "--mfu", "0"], "--mfu"),
    # import-wandb references, names and files
    (["import-wandb", "notaref", "--as", "x", "--root", ROOT], "expected ENTITY/PROJECT/RUN_ID"),
    (["import-wandb", "a/b", "--as", "x", "--root", ROOT], "expected ENTITY/PROJECT/RUN_ID"),
    (["import-wandb", "a/b/c/d", "--as", "x", "--root", ROOT], "expected ENTITY/PROJECT/RUN_ID"),
    (["import-wandb", "a/b/c d", "--as", "x", "--root", ROOT], "expected ENTITY/PROJECT/RUN_ID"),
    (["import-wandb", "a/b/c", "--as", "../up", "--root", ROOT], "--as '../up'"),
    (["import-wandb", "a/b/c", "--as", "x", "--from-csv", "/no/such.csv", "--root", ROOT], "--from-csv /no/such.csv"),
    (["import-wandb", "a/b/c", "--as", "x", "--from-csv", "{csv}", "--root", ROOT], "no history rows"),
    (["import-wandb", "a/b/c", "--root", ROOT], "Missing option '--as'"),
    # dashboard ports and hosts
    (["dashboard", "--root", ROOT, "--port", "-1"], "--port -1"),
    (["dashboard", "--root", ROOT, "--port", "70000"], "--port 70000"),
    (["dashboard", "--root", ROOT, "--port", "http"], "'--port'"),
    (["dashboard", "--root", ROOT, "--host", "nosuchhost.invalid", "--port", "0"], "--host nosuchhost.invalid"),
    (["dashboard", "--root", ROOT, "--host", "192.0.2.123", "--port", "0"], "cannot listen"),
    (["dashboard", "--root", "{tmp}/no/such/root"], "no such folder"),
]

CLI_GAPS = [
    pytest.param(["submit", TINY, "--root", "memory://x"], "memory://", {}, id="memory-root"),
    pytest.param(["plan", TINY, "--root", "ftp://127.0.0.1:1/x"], "ftp://127.0.0.1:1/x", {},
                 id="unreachable-ftp-root"),
    pytest.param(["submit", TINY, "--root", "http://127.0.0.1:1/x"], "http://127.0.0.1:1/x", {},
                 id="unreachable-http-root"),
    pytest.param(["submit", TINY, "--root", ROOT], "LADDER_LEASE_TIMEOUT", {"LADDER_LEASE_TIMEOUT": "soon"}, id="lease-timeout-env"),
    pytest.param(["submit", TINY, "--root", ROOT], "heartbeat", {"LADDER_LEASE_TIMEOUT": "5", "LADDER_HEARTBEAT": "10"},
                 id="heartbeat-not-shorter-than-lease"),
    # A local Ray that cannot start: its temp folder is a file, or too deep for Ray's unix sockets.
    pytest.param(["submit", TINY, "--root", ROOT], "RAY_TMPDIR", {"RAY_TMPDIR": "{csv}"}, id="ray-tmpdir-a-file"),
    pytest.param(["submit", TINY, "--root", ROOT], "too long for Ray's unix sockets",
                 {"RAY_TMPDIR": "{tmp}/" + "d" * 40 + "/" + "e" * 40}, id="ray-tmpdir-too-long"),
    pytest.param(["submit", TINY, "--root", ROOT], "LADDER_RAY_START_S", {"LADDER_RAY_START_S": "later"},
                 id="ray-start-bound-env"),
]


def _check(tmp_path, args, needle, env):
    (tmp_path / "root" / "tiny").mkdir(parents=True)  # an existing (empty) root, for the dashboard
    csv = tmp_path / "empty.csv"
    csv.write_text("a,b\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = [a.replace(ROOT, str(tmp_path / "root")).replace("{csv}", str(csv)).replace("{tmp}", str(tmp_path))
            for a in args]
    env = {k: v.replace("{csv}", str(csv)).replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    proc = run_cli(*args, timeout=HANG_S, **env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("error: "), proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "bad input wrote something"


@pytest.mark.parametrize("args,needle", CASES, ids=[f"{c[0][0]}:{c[1][:30]}" for c in CASES])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, args, needle):
    _check(tmp_path, args, needle, {})


@pytest.mark.parametrize("args,needle,env", CLI_GAPS)
def test_bad_input_that_needs_the_cli(tmp_path, args, needle, env):
    _check(tmp_path, args, needle, env)
