"""A persistent XLA compilation cache beside a ladder's outputs: ``<root>/.jax-cache``.

A small rung spends more time compiling than training: rung_1 of the default ladder compiles 35
programs (the multi-step chunk, the single step, evals, initialisers) in about 7 s of its 17 s.
With the cache warm, the same rung, retrained by ``ladder rerun``, resumed after a crash or trained
again under a second seed once the first has finished, took 10 s; the executables are the same,
so the losses are bit-identical. JAX's default caches only compiles over one second, which none
of these are, so every compile is cached here.

A user's own ``JAX_COMPILATION_CACHE_DIR`` wins, and a root on object storage gets no cache.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR = ".jax-cache"
MAX_BYTES = 2 << 30  # JAX evicts least recently used entries beyond this


def enable(out_dir: str | os.PathLike) -> Path | None:
    """Cache this process's compiles under the ladder root of a step's ``out_dir``
    (``<root>/<ladder>/<step>``); the cache folder, or None when left to the user or unavailable."""
    from ladder.executor.store import strip_file_scheme
    from ladder.trainers.builtin.mirror import is_remote

    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or is_remote(str(out_dir)):
        return None
    import jax

    path = Path(strip_file_scheme(str(out_dir))).resolve().parent.parent / CACHE_DIR
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path
