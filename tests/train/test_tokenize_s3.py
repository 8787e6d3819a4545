"""A corpus, a tokenizer.json and token shards in a bucket of a real S3-compatible server (moto on loopback):
the source is read and digested through fsspec, the shards written there and cached once per node."""

from __future__ import annotations

import gzip
import json

import fsspec
import numpy as np
import pytest

from ladder.dag.tokenize import tokenize
from ladder.spec import DataSpec, DomainSpec
from ladder.trainers.builtin.digest import source_digest
from ladder.trainers.builtin.hf_tokenizer import train_bpe
from ladder.trainers.builtin.sources import SourceError, can_read, check
from ladder.trainers.builtin.stream import open_mixture


@pytest.fixture(autouse=True, scope="module")
def no_shared_ray():
    """tokenize() spreads its shards over Ray when this process has a Ray: the session's shared one
    (tests/conftest.py) may have started its workers before the S3 server set the AWS credentials, so
    these tests tokenize in this process; the next module that needs a Ray starts it again."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    yield


@pytest.fixture
def bucket_corpus(s3_bucket, tmp_path):
    from pydoc_data.topics import topics

    texts = [topics[k] for k in sorted(topics)][:120]
    fs = fsspec.filesystem("s3")
    fs.invalidate_cache()
    body = gzip.compress("".join(json.dumps({"text": t}) + "\n" for t in texts).encode())
    fs.pipe(f"{s3_bucket}/corpus/part-0.jsonl.gz", body)
    local = tmp_path / "corpus"
    local.mkdir()
    (local / "part-0.jsonl.gz").write_bytes(body)
    tok = train_bpe(iter(texts), 400)
    fs.pipe(f"{s3_bucket}/tok/tokenizer.json", tok.encode())
    (tmp_path / "tokenizer.json").write_text(tok)
    return s3_bucket, local, tmp_path / "tokenizer.json"


def test_a_bucket_corpus_tokenizes_and_streams_like_the_local_copy(bucket_corpus, tmp_path, monkeypatch):
    bucket, local, local_tok = bucket_corpus
    monkeypatch.setenv("LADDER_SHARD_CACHE", str(tmp_path / "node-cache"))
    assert source_digest(f"{bucket}/corpus") not in ("missing", "")
    check(f"{bucket}/corpus")
    base = {"domain": "docs", "heldout_frac": 0.1, "format": 1, "shard_bytes": 20_000}
    remote = tokenize({**base, "source": f"{bucket}/corpus", "tokenizer": f"{bucket}/tok/tokenizer.json"},
                      f"{bucket}/shards")
    here = tokenize({**base, "source": str(local), "tokenizer": str(local_tok)}, str(tmp_path / "shards"))
    assert remote == here and remote["shards"] >= 3
    assert fsspec.filesystem("s3").exists(f"{bucket}/shards/manifest.json")

    data = DataSpec(domains=(DomainSpec("docs", f"{bucket}/corpus"),), heldout_frac=0.1, tokenizer="x.json")
    from_bucket = open_mixture(data, 32, 5, {"docs": f"{bucket}/shards"})
    cached = sorted(p.name for p in (tmp_path / "node-cache").glob("*.npy"))
    manifest = json.loads(fsspec.filesystem("s3").cat_file(f"{bucket}/shards/manifest.json"))
    mapped = {s["splits"][split]["files"][kind]["sha256"] + ".npy" for s in manifest["shards"]
              for split in ("train", "heldout") for kind in ("tokens", "bytes")}
    assert cached == sorted(mapped)  # each file the run maps, once (identical files once between them)
    again = open_mixture(data, 32, 5, {"docs": f"{bucket}/shards"})  # another process on the node: no download
    assert sorted(p.name for p in (tmp_path / "node-cache").glob("*.npy")) == cached
    from_disk = open_mixture(data, 32, 5, {"docs": str(tmp_path / "shards")})
    assert np.array_equal(from_bucket.batches(0, 4, 8), from_disk.batches(0, 4, 8))
    assert np.array_equal(again.eval_windows(0, 4096), from_disk.eval_windows(0, 4096))


def test_an_unreadable_url_is_one_clear_error(s3_bucket):
    with pytest.raises(SourceError, match="no such file or folder"):
        check(f"{s3_bucket}/nothing-here")
    with pytest.raises(SourceError, match="no filesystem"):
        check("nosuchscheme://bucket/corpus")
    assert not can_read("nosuchscheme://bucket/corpus") and can_read(f"{s3_bucket}/x")
