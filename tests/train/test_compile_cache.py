"""The trainer's persistent compilation cache: a second run of the same rung compiles nothing new and
trains to the same losses, bit for bit; a user's own cache folder is left alone."""

from __future__ import annotations

import shutil

import pytest

from ladder.trainers.builtin.compile_cache import CACHE_DIR
from ladder.trainers.builtin.metrics import read_jsonl


def _entries(folder) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


@pytest.mark.slow
def test_second_run_hits_the_cache_and_trains_identically(tmp_path):
    from conftest import ladder_train

    no_user_cache = {"JAX_COMPILATION_CACHE_DIR": None}
    first = ladder_train(tmp_path, "rung_1", 12, no_user_cache)
    cache = tmp_path / CACHE_DIR
    written = _entries(cache)
    assert len(written) >= 3, written  # the chunk, the single step and the eval at least
    run_dir = tmp_path / "smoke" / "train-rung_1"
    losses = [r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl")]
    shutil.rmtree(run_dir)

    second = ladder_train(tmp_path, "rung_1", 12, no_user_cache)
    assert _entries(cache) == written  # every program came from the cache
    assert [r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl")] == losses
    assert second["final_eval_loss"] == first["final_eval_loss"]


@pytest.mark.slow
def test_a_users_cache_folder_wins(tmp_path):
    from conftest import ladder_train

    own = tmp_path / "own-cache"
    ladder_train(tmp_path / "root", "rung_1", 4, {"JAX_COMPILATION_CACHE_DIR": str(own)})
    assert not (tmp_path / "root" / CACHE_DIR).exists()
