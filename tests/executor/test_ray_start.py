"""Starting Ray: a start that fails on a real condition (a port another socket holds) is retried with
backoff until it succeeds or the bound passes; the CLI's one-line refusals of an unusable RAY_TMPDIR are
in tests/faults/test_bad_input_more.py."""

from __future__ import annotations

import os
import socket
import tempfile

import pytest

from ladder.executor.ray_start import check_temp_dir, retry_with_backoff
from ladder.executor.store import ConfigError


def _held_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


def test_a_start_that_fails_is_retried_with_backoff_until_the_port_frees():
    holder, port = _held_port()
    bound: list[socket.socket] = []
    waits: list[float] = []

    def start() -> None:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))  # EADDRINUSE while the holder has it
        except OSError:
            s.close()
            raise
        bound.append(s)

    def on_retry(tries: int, exc: BaseException, wait: float) -> None:
        assert isinstance(exc, OSError)
        waits.append(wait)
        if tries == 2:
            holder.close()  # the stale holder goes away while the driver waits

    tries = retry_with_backoff(start, bound_s=600, first_wait_s=0.01, on_retry=on_retry)
    assert tries == 3 and len(bound) == 1
    assert waits == [0.01, 0.02]  # doubling backoff
    bound[0].close()


def test_a_start_that_keeps_failing_gives_up_with_its_error_once_the_bound_passes():
    holder, port = _held_port()
    waits: list[float] = []

    def start() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

    with pytest.raises(OSError):
        retry_with_backoff(start, bound_s=0.3, first_wait_s=0.05, on_retry=lambda t, e, w: waits.append(w))
    holder.close()
    # Never a wait that would end past the bound: 0.05 + 0.1 fit in 0.3, 0.2 more would not.
    assert waits and sum(waits) <= 0.3 and waits == [0.05 * 2 ** i for i in range(len(waits))]


def test_an_unusable_temp_dir_is_refused_before_ray_tries(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_temp_dir(str(a_file / "ray"))
    with pytest.raises(ConfigError, match="too long"):
        check_temp_dir(str(tmp_path / ("x" * 80)))
    short = tempfile.mkdtemp(prefix="rs-", dir="/tmp")
    try:
        check_temp_dir(os.path.join(short, "ray"))  # a folder still to be made under a writable one is fine
    finally:
        os.rmdir(short)
    check_temp_dir(None)
