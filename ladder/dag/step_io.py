"""A step function's dependency and output folders on local disk, also when the root is remote."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

# Dependency folders an analysis never reads: left out when a remote dir is copied to local disk.
_NOT_READ = ("checkpoints", "checkpoints.corrupt", "wandb")


@contextlib.contextmanager
def local_dirs(dep_dirs: Mapping[str, str], out_dir: str) -> Iterator[tuple[dict[str, str], str]]:
    """(dep_dirs, out_dir) on local disk, for code that reads and writes them with pathlib.

    Local paths come back as they are. For an fsspec URL (s3://, gs://) the deps are copied to a temp
    folder first, and what was written to the temp out_dir is uploaded when the block ends, also when
    it raises (a blocked gate's verdict is a result too), as a local run would have left it.
    """
    from ladder.trainers.builtin.mirror import download_tree, is_remote, upload_tree

    if not is_remote(out_dir):
        yield dict(dep_dirs), out_dir
        return
    tmp = Path(tempfile.mkdtemp(prefix="ladder-step-"))
    try:
        deps = {name: str(download_tree(url, tmp / "deps" / name, skip_top=_NOT_READ))
                for name, url in dep_dirs.items()}
        out = tmp / "out"
        out.mkdir()
        try:
            yield deps, str(out)
        finally:
            upload_tree(out, out_dir)
    finally:
        shutil.rmtree(tmp)
