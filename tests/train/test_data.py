import dataclasses
import json

import numpy as np
import pytest

from ladder.spec import DataSpec, DomainSpec, data_from_dict, to_dict
from ladder.trainers.builtin.data import DataError, Mixture, documents, is_heldout, load_domain


def test_batches_are_deterministic_and_seeded(data_spec):
    a = Mixture(data_spec, 64, seed=7)
    b = Mixture(data_spec, 64, seed=7)
    c = Mixture(data_spec, 64, seed=8)
    np.testing.assert_array_equal(a.batch(5, 8), b.batch(5, 8))
    assert not np.array_equal(a.batch(5, 8), a.batch(6, 8))
    assert not np.array_equal(a.batch(5, 8), c.batch(5, 8))
    x = a.batch(0, 8)
    assert x.shape == (8, 65) and x.dtype == np.int32 and x.min() >= 0 and x.max() < 256


def test_bytes_batches_are_drawn_without_replacement(data_spec):
    """The in-memory bytes data samples as token shards do: every window of a domain once per epoch, each
    domain's share of a block of draws its mixture weight, every row a window of its domain's train split."""
    m = Mixture(data_spec, 32, seed=0)
    docs = m.domains[1]
    steps = 4096 // 16  # one block of draws: 0.6 / 0.4 of it, exactly
    dom, k = m.sampler.draws(np.arange(steps * 16))
    assert np.bincount(dom).tolist() == [2458, 1638]
    seen = m.sampler.windows(1, k[dom == 1])
    assert np.unique(seen).size == seen.size  # no window twice within an epoch
    rows = m.batches(0, steps, 16).reshape(-1, 33)[dom == 1]
    np.testing.assert_array_equal(rows, docs.train.windows(seen))
    for row in rows[::200]:
        assert m.train_windows_overlap(1, row)
    assert m.epochs_seen(steps, 16)["docs"] == pytest.approx(1638 / docs.train.n_windows)
    # past one epoch of the smaller domain, each of its windows has been read exactly once
    n = docs.train.n_windows
    first_epoch = m.sampler.windows(1, np.arange(n))
    assert sorted(first_epoch.tolist()) == list(range(n))


def test_heldout_never_in_training(data_spec):
    m = Mixture(data_spec, 64, seed=0)
    for i, dom in enumerate(m.domains):
        windows = m.eval_windows(i, 2048)
        assert windows.shape[1] == 65 and windows.shape[0] >= 1
        train_bytes = dom.train.tokens[0].tobytes()
        for w in windows[:: max(1, len(windows) // 6)]:
            assert w.astype(np.uint8).tobytes() not in train_bytes
    names = [n for n, _ in documents("builtin:kjv")]
    held = [n for n in names if is_heldout(n, 0.05)]
    assert 0.02 < len(held) / len(names) < 0.09
    # the split is a property of the document, not of the seed or of other settings
    assert held == [n for n in names if is_heldout(n, 0.05)]


def test_eval_windows_spread_over_the_whole_heldout_stream(data_spec):
    spread = Mixture(data_spec, 64, seed=0)
    head = Mixture(dataclasses.replace(data_spec, eval_sample="head"), 64, seed=0)
    for i, dom in enumerate(spread.domains):
        s, h = spread.eval_windows(i, 2048), head.eval_windows(i, 2048)
        held = dom.heldout.tokens[0]
        available = (held.size - 1) // 64
        assert s.shape == h.shape == (32, 65) and available > 4 * 32
        starts, prev = [], -1
        for w in s:  # where each window sits (the first match after the previous one: text can repeat)
            prev = next(k for k in range(prev + 1, available) if np.array_equal(w, held[k * 64:k * 64 + 65]))
            starts.append(prev)
        # the first and the last whole window of the stream, evenly spaced between, none twice
        assert starts[0] == 0 and starts[-1] == available - 1
        gaps = np.diff(starts)
        assert gaps.min() >= 1 and gaps.max() - gaps.min() <= 1
        np.testing.assert_array_equal(h, held[np.arange(32)[:, None] * 64 + np.arange(65)[None, :]])
    # a config written before the field existed reads back as the sample it was evaluated on
    old = {k: v for k, v in to_dict(data_spec).items() if k != "eval_sample"}
    assert data_from_dict(old).eval_sample == "head" and data_from_dict(to_dict(data_spec)).eval_sample == "spread"


@pytest.mark.parametrize("source", ["builtin:stdlib_py", "builtin:pydoc_topics", "builtin:kjv", "builtin:web_bible"])
def test_builtin_corpora_are_real_text(source):
    train, held = load_domain(source, 0.05)
    assert train.size > 300_000 and held.size > 5_000
    text = bytes(train[:20_000]).decode("utf-8", errors="replace")
    assert text.count(" ") > 1000


def test_local_sources(tmp_path):
    (tmp_path / "a.txt").write_text("hello world\n" * 4000)
    rows = [{"text": f"document {i}: " + "lorem ipsum " * 40} for i in range(400)]
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    spec = DataSpec(domains=(DomainSpec("txt", str(tmp_path / "a.txt")), DomainSpec("json", str(tmp_path / "b.jsonl")),
                             DomainSpec("folder", str(tmp_path))), heldout_frac=0.2, eval_tokens=128)
    m = Mixture(spec, 32, seed=0)
    assert [d.name for d in m.domains] == ["txt", "json", "folder"]
    assert m.domains[2].train.n_tokens > m.domains[1].train.n_tokens
    with pytest.raises(DataError, match="no such file"):
        load_domain(str(tmp_path / "missing.txt"), 0.1)
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\nnot json\n')
    with pytest.raises(DataError, match="bad.jsonl:2"):
        load_domain(str(tmp_path / "bad.jsonl"), 0.1)


def _save_to_disk(folder, texts, shards=2):
    """A folder in the layout Dataset.save_to_disk writes: Arrow stream files data-0000i-of-0000n.arrow
    beside state.json (which lists them) and dataset_info.json (the `datasets` library is not a dependency)."""
    import pyarrow as pa

    folder.mkdir(parents=True)
    per = -(-len(texts) // shards)
    names = []
    for i in range(shards):
        table = pa.table({"id": list(range(i * per, min(len(texts), (i + 1) * per))), "text": texts[i * per:(i + 1) * per]})
        name = f"data-{i:05d}-of-{shards:05d}.arrow"
        with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        names.append(name)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": n} for n in names],
                                                   "_split": "train", "_fingerprint": "0" * 16}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {"id": {"dtype": "int64"},
                                                                       "text": {"dtype": "string"}}}))


def test_a_datasets_folder_reads_as_its_arrow_files(tmp_path):
    texts = [f"record {i}: " + "the quick brown fox " * (5 + i % 7) for i in range(300)]
    _save_to_disk(tmp_path / "ds", texts)
    docs = list(documents(str(tmp_path / "ds")))
    assert [t for _, t in docs] == texts  # every row's text, in order; state.json and dataset_info.json skipped
    assert docs[0][0] == "data-00000-of-00002.arrow/data-00000-of-00002.arrow:0"
    # a DatasetDict: a folder per split and dataset_dict.json
    _save_to_disk(tmp_path / "dd" / "train", texts[:200])
    _save_to_disk(tmp_path / "dd" / "test", texts[200:])
    (tmp_path / "dd" / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    assert sorted(t for _, t in documents(str(tmp_path / "dd"))) == sorted(texts)
    train, held = load_domain(str(tmp_path / "ds"), 0.2)
    assert train.size + held.size == sum(len(t.encode()) + 1 for t in texts)  # every byte and one separator a row
    # a folder without a text column: one line naming the file and the fix
    import pyarrow as pa

    (tmp_path / "bad").mkdir()
    with pa.OSFile(str(tmp_path / "bad" / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, pa.schema([("body", pa.string())])) as writer:
            writer.write_table(pa.table({"body": ["no text column"]}))
    with pytest.raises(DataError, match=r"bad.*arrow file has no 'text' column.*name the text column 'text'"):
        load_domain(str(tmp_path / "bad"), 0.1)
