"""sha256 of a file's bytes: the corpus digests, the token shards' manifests and the checkpoints' sums.
A leaf module, so the modules that read data and those that data reads can all use it."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
