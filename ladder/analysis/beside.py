"""Run one function in a second Python process while this one works on: ``with beside(fn, *args)
as result: ...``, then ``result()`` in the block or after it.

The fit step uses it to fit the whole-curve law on the machine's second core while the final-loss
law bootstraps on the first (37 s and 21 s of the default ladder's 59 s fit step, one after the
other). A plain ``python -c`` child, not ``multiprocessing``: spawn re-runs the caller's main
script, which a user's script without a ``__main__`` guard cannot survive, and fork copies a
Ray worker's threads' locks. The function and its arguments travel pickled; its exception comes
back as one whose message holds the child's traceback. With one core it runs inline.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class ChildFailed(RuntimeError):
    """The function raised in the child process; the message is the child's traceback."""


@contextlib.contextmanager
def beside(fn: Callable[..., Any], *args: Any) -> Iterator[Callable[[], Any]]:
    if len(os.sched_getaffinity(0)) < 2:
        yield lambda: fn(*args)
        return
    with tempfile.TemporaryDirectory(prefix="ladder-beside-") as tmp:
        job, out = Path(tmp) / "job.pkl", Path(tmp) / "out.pkl"
        job.write_bytes(pickle.dumps((fn, args)))
        # One BLAS thread in the child: two processes each spreading small products over both cores
        # took 55 s where one thread each took 34 s (Ray gives the fit step OMP_NUM_THREADS=1 already).
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        child = subprocess.Popen([sys.executable, "-c", f"from {__name__} import _main; _main({str(job)!r}, {str(out)!r})"],
                                 env=env)
        got: list = []

        def result() -> Any:
            if not got:
                got.append(_collect(child, out))
            if isinstance(got[0], ChildFailed):
                raise got[0]
            return got[0]

        try:
            yield result
        except BaseException:
            if child.poll() is None:  # the block failed: do not leave the child running
                child.kill()
                child.wait()
            raise
        if not got:  # not asked for inside the block: finish now, before its folder goes
            got.append(_collect(child, out))


def _collect(child: subprocess.Popen, out: Path) -> Any:
    """The child's value, or the ChildFailed that result() raises."""
    code = child.wait()
    if not out.exists():
        return ChildFailed(f"{__name__}: the child process exited with code {code} before writing a result")
    ok, value = pickle.loads(out.read_bytes())
    return value if ok else ChildFailed(value)


def _main(job: str, out: str) -> None:
    fn, args = pickle.loads(Path(job).read_bytes())
    try:
        result = (True, fn(*args))
    except Exception:  # noqa: BLE001 - carried to the parent, which raises it
        result = (False, traceback.format_exc())
    tmp = Path(out + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(out)
