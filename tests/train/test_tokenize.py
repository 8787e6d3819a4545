"""The tokenize stage and the shards training maps: real text, a real tokenizers BPE, real files.

A small corpus (Python's pydoc topics: a gzip JSONL file, a zstd text file and a plain one) is tokenized
into several shards; the tests read them back as a trainer does."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from patience import HANG_S

from ladder.dag.tokenize import tokenize
from ladder.spec import DataSpec, DomainSpec
from ladder.trainers.builtin.data import documents, is_heldout
from ladder.trainers.builtin.hf_tokenizer import HFTokenizer, train_bpe
from ladder.trainers.builtin.sampling import Sampler, block_counts, permute
from ladder.trainers.builtin.shards import ShardError
from ladder.trainers.builtin.stream import open_mixture

HELDOUT = 0.1
SHARD_BYTES = 60_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    from pydoc_data.topics import topics

    import zstandard

    root = tmp_path_factory.mktemp("corpus")
    keys = sorted(topics)
    third = len(keys) // 3
    src = root / "src"
    src.mkdir()
    with gzip.open(src / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        for k in keys[:third]:
            f.write(json.dumps({"text": topics[k]}) + "\n")
    (src / "b.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(
        "\n".join(topics[k] for k in keys[third : 2 * third]).encode()))
    (src / "c.txt").write_text("\n".join(topics[k] for k in keys[2 * third :]) + "\nnaïve café — 東京\n")
    tok_path = root / "tokenizer.json"
    tok_path.write_text(train_bpe((t for _, t in documents(str(src))), 512))
    config = {"domain": "docs", "source": str(src), "tokenizer": str(tok_path), "heldout_frac": HELDOUT,
              "format": 1, "shard_bytes": SHARD_BYTES}
    shards = root / "shards"
    result = tokenize(config, str(shards))
    return {"src": str(src), "tokenizer": str(tok_path), "config": config, "shards": str(shards), "result": result}


def _data(corpus) -> DataSpec:
    return DataSpec(domains=(DomainSpec("docs", corpus["src"]),), tokenizer=corpus["tokenizer"],
                    heldout_frac=HELDOUT, eval_tokens=2048)


def test_shards_hold_every_document_and_its_bytes(corpus):
    manifest = json.loads(Path(corpus["shards"], "manifest.json").read_text())
    assert manifest["dtype"] == "uint16" and manifest["tokenizer"]["vocab_size"] <= 512
    assert len(manifest["shards"]) >= 4  # the corpus spans several shards
    docs = [(n, t) for n, t in documents(corpus["src"]) if t]
    for split, held in (("train", False), ("heldout", True)):
        texts = [t for n, t in docs if is_heldout(n, HELDOUT) == held]
        totals = manifest["totals"][split]
        assert totals["docs"] == len(texts)
        # each token's byte count sums to the split's UTF-8 text: the denominator of bits per byte
        assert totals["bytes"] == sum(len(t.encode("utf-8")) for t in texts)
    tok = HFTokenizer.load(corpus["tokenizer"])
    shard = Path(corpus["shards"])
    tokens = np.load(shard / "00000.train.tokens.npy")
    starts = np.load(shard / "00000.train.docs.npy")
    first = [t for n, t in docs if not is_heldout(n, HELDOUT)][0]
    assert tok.decode(tokens[starts[0] : starts[1] - 1]) == first  # byte-level BPE round-trips
    assert tokens[starts[1] - 1] == tok.eot


KILLER = """
import os, signal, sys, json
from ladder.dag import tokenize as t
from ladder.trainers.builtin import shards
real = shards.put
def put(fs, path, data):
    if os.path.basename(path).startswith("00002.heldout"):
        real(fs, path, data[: len(data) // 2])  # a torn write, then the process dies
        os.kill(os.getpid(), signal.SIGKILL)
    real(fs, path, data)
t.put = put
t.tokenize(json.loads(sys.argv[1]), sys.argv[2])
"""


def test_killed_tokenize_resumes_shard_by_shard(corpus, tmp_path):
    out = tmp_path / "shards"
    proc = subprocess.run([sys.executable, "-c", KILLER, json.dumps(corpus["config"]), str(out)],
                          capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (out / "manifest.json").exists() and not (out / "00002.json").exists()
    kept = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("0000[01].*")}
    assert len(kept) == 2 * 7  # two whole shards: six arrays and a record each

    result = tokenize(corpus["config"], str(out))
    assert result["reused_shards"] == 2
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("0000[01].*")} == kept
    clean = json.loads(Path(corpus["shards"], "manifest.json").read_text())
    assert json.loads((out / "manifest.json").read_text()) == clean


def test_corrupt_or_truncated_shard_fails_naming_it(corpus, tmp_path):
    import shutil

    copy = tmp_path / "shards"
    shutil.copytree(corpus["shards"], copy)
    data = _data(corpus)
    victim = copy / "00001.train.tokens.npy"
    raw = bytearray(victim.read_bytes())
    raw[-3] ^= 0xFF
    victim.write_bytes(bytes(raw))
    with pytest.raises(ShardError, match=r"00001\.train\.tokens\.npy: corrupt"):
        open_mixture(data, 32, 0, {"docs": str(copy)})
    victim.write_bytes(bytes(raw[:-100]))
    with pytest.raises(ShardError, match=r"00001\.train\.tokens\.npy: truncated"):
        open_mixture(data, 32, 0, {"docs": str(copy)})


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000, 4097])
def test_permutation_is_a_bijection(n):
    out = permute(np.arange(n), n, (5, 1))
    assert np.array_equal(np.sort(out), np.arange(n))
    if n > 16:
        assert not np.array_equal(out, np.arange(n))  # shuffled
        assert not np.array_equal(out, permute(np.arange(n), n, (5, 2)))  # another epoch, another order


def test_each_window_once_per_epoch_in_the_mixture_proportions():
    counts = block_counts(np.array([0.7, 0.3]), 4096)
    assert counts.tolist() == [2867, 1229]
    sampler = Sampler(seed=3, weights=np.array([0.7, 0.3]), n_windows=[500, 130])
    dom, k = sampler.draws(np.arange(3 * 4096))
    for d, n in enumerate((500, 130)):
        mine = k[dom == d]
        assert mine.tolist() == list(range(mine.size))  # a domain's draws are numbered in order
        seen = sampler.windows(d, mine)
        for e in range(mine.size // n):
            assert sorted(seen[e * n : (e + 1) * n].tolist()) == list(range(n))  # every window, once
    assert sampler.epochs(3 * 4096) == pytest.approx([3 * 2867 / 500, 3 * 1229 / 130])


def test_batches_are_a_pure_function_of_seed_and_step(corpus):
    data = _data(corpus)
    a = open_mixture(data, 32, 7, {"docs": corpus["shards"]})
    b = open_mixture(data, 32, 7, {"docs": corpus["shards"]})
    assert np.array_equal(a.batches(40, 3, 8), b.batches(40, 3, 8))
    assert not np.array_equal(a.batch(0, 8), open_mixture(data, 32, 8, {"docs": corpus["shards"]}).batch(0, 8))
    n = a.domains[0].train.n_windows
    _, k = a.sampler.draws(np.arange(n // 8 * 8))
    first_epoch = a.sampler.windows(0, k)
    assert np.unique(first_epoch).size == first_epoch.size  # no window twice in the first epoch
    assert np.array_equal(a.batch(3, 8), a.domains[0].train.windows(first_epoch[24:32]))
    assert a.epochs_seen(n // 8, 8)["docs"] == pytest.approx((n // 8) * 8 / n)
    # A gang's process draws only its rows of each batch: exactly those rows of the whole batch.
    assert np.array_equal(a.batches(40, 3, 8, slice(4, 8)), a.batches(40, 3, 8)[:, 4:8])


def test_evals_read_the_heldout_windows_and_their_bytes(corpus):
    mix = open_mixture(_data(corpus), 32, 0, {"docs": corpus["shards"]})
    held = mix.domains[0].heldout
    windows = mix.eval_windows(0, 10**9)  # every held-out window
    assert windows.shape == (held.n_windows, 33)
    manifest = json.loads(Path(corpus["shards"], "manifest.json").read_text())
    # all windows' targets cover the held-out bytes but for each shard's tail past its last window
    assert 0.8 * manifest["totals"]["heldout"]["bytes"] < mix.eval_bytes(0, 10**9) <= manifest["totals"]["heldout"]["bytes"]
    # exactly: the targets' bytes plus each shard's first token and tail are the held-out text's UTF-8 bytes,
    # counted here from the documents themselves (bits per byte's denominator, independently of the manifest)
    texts = [t for n, t in documents(corpus["src"]) if t and is_heldout(n, HELDOUT)]
    uncovered = 0
    for tokens, nbytes in zip(held.tokens, held.nbytes, strict=True):
        last = (tokens.size - 1) // 32 * 32  # the last target of the shard's last whole window
        uncovered += int(nbytes[0]) + int(nbytes[last + 1:].sum())
    assert mix.eval_bytes(0, 10**9) + uncovered == sum(len(t.encode("utf-8")) for t in texts)


def test_resumed_rung_sees_the_same_batches_bit_for_bit(corpus, tmp_path, rung_factory):
    from ladder.spec import ModelSpec
    from ladder.trainers.builtin import train
    from ladder.trainers.builtin.metrics import read_jsonl
    from tests.train.conftest import resumable_rung

    rung = resumable_rung(ModelSpec(d_model=32, n_layers=2, n_heads=2, vocab=512), steps=16)
    data, shards = _data(corpus), {"docs": corpus["shards"]}
    whole = train(rung, data, tmp_path / "whole", shard_dirs=shards)
    part = train(rung, data, tmp_path / "parts", max_steps=10, shard_dirs=shards)
    assert part["steps"] == 10 and not part["complete"]
    rest = train(rung, data, tmp_path / "parts", shard_dirs=shards)
    assert rest["status"] == whole["status"] == "SUCCESS"
    got = [r["loss"] for r in read_jsonl(tmp_path / "parts" / "metrics.jsonl")]
    assert got == [r["loss"] for r in read_jsonl(tmp_path / "whole" / "metrics.jsonl")]  # bit for bit
    assert rest["final_bpb"] == whole["final_bpb"] and 0 < whole["final_bpb"] < 9
    assert whole["epochs_by_domain"]["docs"] > 0


def test_a_vocab_smaller_than_the_tokenizer_is_refused(corpus, tmp_path):
    from ladder.spec import ModelSpec
    from ladder.trainers.builtin import train
    from tests.train.conftest import make_rung

    rung_small = make_rung(ModelSpec(d_model=32, n_layers=2, n_heads=2, vocab=300), steps=2)
    with pytest.raises(ValueError, match=r"model\.vocab: 300 is smaller than its tokenizer's"):
        train(rung_small, _data(corpus), tmp_path / "run", shard_dirs={"docs": corpus["shards"]})
    assert not os.path.exists(tmp_path / "run" / "result.json")


def test_byte_counts_sum_to_the_text_for_any_tokenizer(tmp_path):
    """A byte-level BPE counts by lookup; a tokenizer whose pre-tokenizer drops whitespace by its offsets."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts = ["héllo wörld — ok 東京 naïve  ", "def f(x):\n    return x ** 2\n", "  spaces   and\ttabs\r\n"]
    words = Tokenizer(models.BPE(unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.train_from_iterator(texts * 5, trainers.BpeTrainer(vocab_size=200, special_tokens=["[UNK]", "</s>"],
                                                             show_progress=False))
    (tmp_path / "words.json").write_text(words.to_str())
    (tmp_path / "bpe.json").write_text(train_bpe(iter(texts * 5), 300))
    for name, table in (("words.json", False), ("bpe.json", True)):
        tok = HFTokenizer.load(str(tmp_path / name))
        assert (tok.byte_table is not None) == table
        for text, (ids, counts) in zip(texts, tok.encode_batch(texts), strict=True):
            assert ids.size == counts.size and counts.sum() == len(text.encode("utf-8")), (name, text)
