"""Storage for step directories: a local path or any fsspec URL (gs://, s3://, memory://, ...).

Two primitives carry the executor's guarantees:
- ``write_atomic``: readers see the old bytes or the new bytes, never a torn file (local: a temp file and
  ``os.replace``; object stores: one PUT, which is atomic per object).
- ``create_exclusive``: exactly one of several concurrent creators wins (local: ``O_CREAT | O_EXCL``;
  fsspec: mode ``"xb"`` where the backend implements it, e.g. conditional writes on GCS/S3).
Internal paths are fsspec paths without protocol; ``url()`` gives what a user (or a step) should use.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from typing import Any

import fsspec


class ConfigError(ValueError):
    """A user's setting the executor cannot work with (a lease env var, a root Ray workers cannot see):
    its message is one line naming the setting and the fix, fit to show as is (the CLI exits 2)."""


def _temp_copy(path: str, data: bytes) -> str:
    """``data`` written in full to a temporary file beside ``path`` (same filesystem, so rename/link work)."""
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{os.path.basename(path)}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:  # already gone: the temp file was renamed or never created
        pass


def is_local_fs(fs) -> bool:
    """True when an fsspec filesystem is the local disk (plain paths, file://)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocols or "local" in protocols


def strip_file_scheme(url: str) -> str:
    return url[len("file://") :] if url.startswith("file://") else url


class Store:
    def __init__(self, root: str):
        self.root_url = str(root)
        self.fs, base = fsspec.core.url_to_fs(self.root_url)
        self.local = is_local_fs(self.fs)
        self.root = os.path.abspath(base) if self.local else base.rstrip("/")

    def __reduce__(self):  # ship the URL, not the filesystem object
        return (Store, (self.root_url,))

    # ---- paths
    def join(self, *parts: str) -> str:
        if self.local:
            return os.path.join(*parts)
        return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts))

    def url(self, path: str) -> str:
        """What a user or a step function should use for ``path``: a plain local path or a full URL."""
        return path if self.local else self.fs.unstrip_protocol(path)

    def to_path(self, url: str) -> str:
        if self.local:
            return os.path.abspath(strip_file_scheme(url))
        return fsspec.core.url_to_fs(url)[1]

    # ---- reads
    def read_bytes(self, path: str) -> bytes | None:
        try:
            if self.local:
                with open(path, "rb") as f:
                    return f.read()
            return self.fs.cat_file(path)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read_json(self, path: str) -> Any | None:
        """The parsed file, or None when it is missing or not (yet) valid JSON."""
        data = self.read_bytes(path)
        if data is None:
            return None
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None

    def mtime(self, path: str) -> float | None:
        """Modification time (epoch seconds), None when missing or the backend does not say."""
        try:
            if self.local:
                return os.path.getmtime(path)
            return self.fs.modified(path).timestamp()
        except (OSError, NotImplementedError, AttributeError, ValueError, TypeError):
            return None

    def exists(self, path: str) -> bool:
        return os.path.exists(path) if self.local else self.fs.exists(path)

    def listdir(self, path: str) -> list[str]:
        """Base names in ``path`` ([] when it does not exist)."""
        try:
            if self.local:
                return os.listdir(path)
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False, refresh=True)]
        except (FileNotFoundError, NotADirectoryError):
            return []

    # ---- writes
    def makedirs(self, path: str) -> None:
        if self.local:
            os.makedirs(path, exist_ok=True)
        else:
            self.fs.makedirs(path, exist_ok=True)

    def write_atomic(self, path: str, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        if self.local:
            tmp = _temp_copy(path, data)
            try:
                os.replace(tmp, path)
            except BaseException:
                _unlink_quietly(tmp)
                raise
        else:
            self.fs.pipe_file(path, data)

    def write_json(self, path: str, obj: Any) -> None:
        self.write_atomic(path, json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n")

    def create_exclusive(self, path: str, data: bytes | str) -> bool:
        """Create ``path`` with ``data`` unless it exists; True for the one caller that created it."""
        if isinstance(data, str):
            data = data.encode()
        if self.local:
            # Write a temp file in full, then hard-link it into place: link() fails if the name exists,
            # so exactly one creator wins, and no reader ever sees the file empty or half-written
            # (an O_EXCL create followed by a write has a moment where the file exists but is empty).
            tmp = _temp_copy(path, data)
            try:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
                except OSError:  # a filesystem without hard links: exclusive create, then write
                    return self._create_excl(path, data)
                return True
            finally:
                _unlink_quietly(tmp)
        try:
            with self.fs.open(path, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError, TypeError):
            self._warn_no_exclusive_create()
            # The backend has no exclusive create: check, write, read back (best effort: two drivers that
            # check at the same moment can both win, hence the warning).
            try:
                if self.fs.exists(path):
                    return False
                # Callers' data is unique (it names the claimer's owner id and run id).
                self.fs.pipe_file(path, data)
                return self.fs.cat_file(path) == data
            except NotImplementedError:
                raise ConfigError(f"root {self.root_url}: this storage can neither create a file exclusively nor "
                                  "write one; use a local folder or gs:// / s3://") from None

    _warned: set[str] = set()

    def _warn_no_exclusive_create(self) -> None:
        """Once per root and process: leases here guard one driver at a time, not two racing ones."""
        if self.root_url in Store._warned:
            return
        Store._warned.add(self.root_url)
        print(f"[ladder] warning: root {self.root_url} has no exclusive create; run one driver at a time on it "
              "(two racing drivers could both claim a step); gs:// and s3:// have it", file=sys.stderr, flush=True)

    @staticmethod
    def _create_excl(path: str, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return True

    def move(self, src: str, dst: str) -> None:
        """Move a file or folder (local: a rename; object stores: copy, then delete the source)."""
        if self.local:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            return
        self.fs.mv(src, dst, recursive=True)

    def rmtree(self, path: str) -> None:
        """Delete a folder and everything in it (missing: nothing to do)."""
        if self.local:
            if os.path.isdir(path):
                shutil.rmtree(path)
            return
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def remove(self, path: str) -> None:
        try:
            if self.local:
                os.unlink(path)
            else:
                self.fs.rm_file(path)
        except FileNotFoundError:
            pass
