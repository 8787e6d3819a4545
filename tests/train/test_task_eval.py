"""Multiple-choice tasks (data.tasks): the scorer against one-by-one log-likelihoods, the metrics against a hand
count, the built-in cloze's determinism and balance, and task columns in a real run's eval rows."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

import jax
import numpy as np
import pytest
from conftest import DENSE, make_rung

from ladder.spec import DataSpec, DomainSpec, TaskSpec
from ladder.trainers.builtin import task_builtin
from ladder.trainers.builtin.model import build
from ladder.trainers.builtin.task_eval import encode, make_score, metrics, row_loglik
from ladder.trainers.builtin.tasks import TaskItem
from ladder.trainers.builtin.tokenizer import ByteTokenizer

ITEMS = [
    TaskItem("The cat sat on the", (" mat.", " moon and the stars", " dog"), 0),
    TaskItem("def add(a, b):\n    return", (" a + b", " a - b"), 1),
    TaskItem("", ("empty context", "x"), 0),  # conditions on the end-of-text token
    # a context longer than the row: cut from the left
    TaskItem("In the beginning God created the heaven and the earth. " * 3, (" And", " Then the"), 0),
]


def _by_hand(fm, items: list[TaskItem], width: int) -> np.ndarray:
    """Each choice's log-likelihood as a reader computes it: the context cut to fit, then the choice, log-softmax
    of the logits at every position (all sequences right-padded into one call: causal, so the padding after a
    sequence leaves its positions alone), summed over the choice's positions in float64."""
    tok = ByteTokenizer()
    seqs, spans = [], []
    for item in items:
        for choice in item.choices:
            ctx = tok.encode(item.context).astype(np.int64) if item.context else np.array([tok.eot])
            cont = tok.encode(choice).astype(np.int64)[:width]
            ctx = ctx[-(width + 1 - cont.size):]
            seqs.append(np.concatenate([ctx, cont]))
            spans.append((ctx.size, cont))
    padded = np.zeros((len(seqs), max(s.size for s in seqs)), np.int32)
    for r, seq in enumerate(seqs):
        padded[r, : seq.size] = seq
    logits = np.asarray(jax.jit(fm.apply)(fm.params, fm.bias, padded[:, :-1])[0], np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
    return np.array([sum(logp[r, n_ctx - 1 + i, cont[i]] for i in range(cont.size))
                     for r, (n_ctx, cont) in enumerate(spans)])


@pytest.mark.parametrize("which", ["dense", "moe"])
def test_batched_scores_are_each_choices_own_loglikelihood(which, dense_spec, moe_spec):
    # dropless, as the evals score a mixture of experts: no token's experts depend on the rows beside it
    fm = build(dense_spec, 0) if which == "dense" else build(moe_spec, 0, dispatch="dense")
    rows = encode("t", ITEMS, ByteTokenizer(), seq_len=32)
    assert rows.width == 32  # the longest row (167 bytes) capped at the sequence length
    got = row_loglik(make_score(fm), fm.params, fm.bias, rows)
    want = _by_hand(fm, ITEMS, rows.width)
    # float32 logits summed over up to 20 tokens against a float64 sum: the gap measured on CPU is three orders below
    # 1e-4, which leaves room for other backends' float32 matmuls and is far below what a wrong position or mask moves
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert np.all(want < 0)


def test_metrics_are_len_norm_accuracy_and_bits_per_byte_of_the_right_choice():
    rows = encode("t", ITEMS, ByteTokenizer(), seq_len=64)
    # per character, item 0's longest choice (19 characters) wins though its total is the lowest
    ll = np.array([-10.0, -19.5, -6.0,   -3.0, -2.0,   -1.0, -3.0,   -4.0, -4.0])
    m = metrics(rows, ll)
    # item 0: -2.0, -1.03, -1.5 per char -> choice 1 (wrong); item 1: choice 1 (right); item 2: -1/13 vs -3 ->
    # choice 0 (right); item 3: -1.0 vs -0.5 -> choice 1 (wrong)
    assert m["task_acc/t"] == 0.5
    assert m["task_acc_se/t"] == pytest.approx(math.sqrt(0.25 / 4))
    bpb = np.array([10.0 / 5, 2.0 / 6, 1.0 / 13, 4.0 / 4]) / math.log(2)
    assert m["task_bpb/t"] == pytest.approx(float(bpb.mean()))


@pytest.fixture(scope="module")
def text_data(tmp_path_factory) -> DataSpec:
    """Two small file domains whose held-out halves the cloze draws from (no corpus read)."""
    folder = tmp_path_factory.mktemp("cloze")
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "the", "of", "river", "stone", "light", "under", "over", "and"]
    for name in ("a", "b"):
        docs = [" ".join(rng.choice(words, 400)) + "\n" for _ in range(40)]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return DataSpec(domains=(DomainSpec("a", str(folder / "a.jsonl")), DomainSpec("b", str(folder / "b.jsonl"))),
                    heldout_frac=0.3)


def test_builtin_cloze_is_deterministic_and_balanced(text_data):
    task = TaskSpec("cloze", "builtin:heldout_cloze", items=64, seed=3)
    items = task_builtin.generate(task, text_data)
    assert items == task_builtin.generate(task, text_data)
    assert items != task_builtin.generate(dataclasses.replace(task, seed=4), text_data)
    assert len(items) == 64
    assert Counter(i.answer for i in items) == {k: 16 for k in range(task_builtin.CHOICES)}
    held = [task_builtin.heldout_text(d.source, text_data.heldout_frac) for d in text_data.domains]
    for k, item in enumerate(items):
        text = held[0] if k < 32 else held[1]  # split evenly over the domains, in order
        right = item.choices[item.answer]
        assert item.context + right in text  # the right choice is what follows the context
        assert len(set(item.choices)) == len(item.choices)
        for c in item.choices:
            assert len(c) == task_builtin.CHOICE_CHARS and task_builtin.SEP not in c
            assert (item.context[-task_builtin.KEY_CHARS:] + c) in text  # each follows the context's last chars


def test_task_columns_in_a_real_runs_eval_rows(tmp_path, data_spec):
    """A few steps of a real run: every eval row (and the final eval in result.json) carries each task's columns,
    a file's task and a built-in's."""
    from ladder.trainers.builtin import train

    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps({"context": i.context, "choices": list(i.choices), "answer": i.answer}) + "\n"
                                 for i in ITEMS))
    data = dataclasses.replace(data_spec, final_eval_tokens=2 * data_spec.eval_tokens,
                               tasks=(TaskSpec("file_task", str(task_file)), TaskSpec("cloze", "builtin:heldout_cloze", items=8)))
    result = train(make_rung(DENSE, steps=8, eval_every=4), data, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [4, 8]
    for r in rows:
        for name, n in (("file_task", len(ITEMS)), ("cloze", 8)):
            acc = r[f"task_acc/{name}"]
            assert acc * n == pytest.approx(round(acc * n))  # a share of the items
            assert r[f"task_bpb/{name}"] > 0
    assert rows[0]["task_bpb/cloze"] != rows[1]["task_bpb/cloze"]  # scored on each eval's parameters
    assert result["status"] == "SUCCESS"
    # the final eval reads a larger loss sample; its task columns are the last eval's (same parameters, same items)
    assert result["final_eval_loss"] != rows[-1]["eval_loss"]
    assert result["final_task_metrics"] == {k: v for k, v in rows[-1].items() if k.startswith("task_")}


def test_a_bpe_tokenizer_encodes_each_choice_on_its_own_tokens(tmp_path):
    """Under a BPE the rows mask exactly the choice's own tokens, and the run's task scorer loads the tokenizer."""
    from ladder.trainers.builtin.hf_tokenizer import HFTokenizer, train_bpe
    from ladder.trainers.builtin.task_eval import task_runner

    path = tmp_path / "tokenizer.json"
    path.write_text(train_bpe([i.context + " ".join(i.choices) for i in ITEMS] * 20, 300))
    tok = HFTokenizer.load(str(path))
    rows = encode("t", ITEMS, tok, seq_len=64)
    choices = [c for i in ITEMS for c in i.choices]
    assert rows.mask.sum(axis=1).tolist() == [len(tok.encode(c)) for c in choices]
    for r, choice in enumerate(choices):  # the masked targets are the choice's tokens, in order
        at = np.flatnonzero(rows.mask[r])
        assert rows.tokens[r, at + 1].tolist() == tok.encode(choice).tolist()
    fm = build(dataclasses.replace(DENSE, vocab=tok.vocab_size), 0)
    data = DataSpec(tokenizer=str(path), tasks=(TaskSpec("t", str(tmp_path / "t.jsonl")),))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"context": i.context, "choices": list(i.choices),
                                                          "answer": i.answer}) + "\n" for i in ITEMS))
    row = task_runner(data, 64, fm)(fm.params, fm.bias)
    assert set(row) == {"task_acc/t", "task_acc_se/t", "task_bpb/t"}


def test_a_bpe_ladders_runs_depend_on_its_tokenizer_only_with_tasks():
    """Task items are encoded with the trained BPE: its runs take the tokenizer step as a dependency then, and
    only then (a BPE ladder without tasks keeps its steps' hashes)."""
    from ladder.dag.stages import build_steps
    from ladder.spec import load_spec

    spec = load_spec("experiments/smoke_bpe.py")
    with_tasks = dataclasses.replace(spec, data=dataclasses.replace(
        spec.data, tasks=(TaskSpec("cloze", "builtin:heldout_cloze"),)))
    for s, expect in ((spec, False), (with_tasks, True)):
        runs = [st for st in build_steps(s) if st.name.startswith("rung_")]
        assert runs and all(("tokenizer" in {d.step for d in st.deps}) == expect for st in runs)
