"""A checkpoint write that fails, on a real 4 MiB tmpfs holding the checkpoints: because the disk is
full (ENOSPC), or because the file system was remounted read-only under the run (EROFS, the write
failure root meets: the tests run as root, which ignores file modes, so EACCES cannot be provoked).
Either way the run stops with a message naming the error, the checkpoint and the newest good one;
the previous checkpoint stays valid; once the disk is writable again the rung resumes from it and
finishes. A tmpfs needs root; without it the tests are skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import TINY

from ladder.spec import load_spec

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()[:100]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(disk: Path) -> None:
    # Unbuffered, so the disk-full error comes from write() here, never from close() in the caller's callback.
    with open(disk / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (64 * 1024))
                f.flush()
        except OSError:
            pass


def _break_then_resume(tmp_path: Path, disk: Path, break_disk, repair_disk, errors: tuple[str, ...], capfd) -> None:
    from ladder.trainers.builtin import train
    from ladder.trainers.builtin.checkpoint import Checkpointer

    spec = load_spec(TINY, ["rungs[0].tokens=16384", "rungs[0].checkpoint_every=8"])  # 64 steps
    rung, data = spec.rungs[0], spec.data
    out = tmp_path / "rung_1"
    out.mkdir()
    (disk / "checkpoints").mkdir()
    os.symlink(disk / "checkpoints", out / "checkpoints")

    class BreakDiskAfter16:
        def on_checkpoint(self, step):
            if step == 16:
                break_disk()

    with pytest.raises(Exception) as info:
        train(rung, data, out, callbacks=[BreakDiskAfter16()])
    text = f"{type(info.value).__name__}: {info.value}"
    cause = info.value
    while cause.__cause__ or cause.__context__:
        cause = cause.__cause__ or cause.__context__
        text += f" <- {type(cause).__name__}: {cause}"
    assert any(e in text for e in errors), text
    # One clear message: which checkpoint failed, where, and which one is still good.
    assert "checkpoint at step 24 could not be written" in str(info.value), text
    assert "the newest complete checkpoint is step 16" in str(info.value), text
    assert not (out / "result.json").exists()
    capfd.readouterr()

    repair_disk()
    # The checkpoint at 16 is intact (the failed one at 24 is not listed as complete).
    assert max(Checkpointer(out / "checkpoints").steps()) == 16
    result = train(rung, data, out)
    printed = capfd.readouterr()
    assert "resumed from step 16" in printed.out + printed.err
    assert "corrupt" not in printed.out + printed.err
    assert result["status"] == "SUCCESS" and result["steps"] == 64


def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(tmp_path, small_disk, capfd):
    _break_then_resume(tmp_path, small_disk, lambda: _fill(small_disk), lambda: os.unlink(small_disk / "filler"),
                       ("No space left on device", "Errno 28"), capfd)


def test_read_only_disk_while_checkpointing_keeps_the_previous_checkpoint(tmp_path, small_disk, capfd):
    def remount(mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(small_disk)], check=True, capture_output=True)

    _break_then_resume(tmp_path, small_disk, lambda: remount("ro"), lambda: remount("rw"),
                       ("Read-only file system", "Errno 30"), capfd)
