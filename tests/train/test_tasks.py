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


def _one_by_one(fm, item: TaskItem, width: int) -> list[float]:
    """Each choice's log-likelihood from its own unpadded forward pass, as a reader would compute it."""
    tok = ByteTokenizer()
    out = []
    for choice in item.choices:
        ctx = tok.encode(item.context).astype(np.int64) if item.context else np.array([tok.eot])
        cont = tok.encode(choice).astype(np.int64)[:width]
        ctx = ctx[-(width + 1 - cont.size):]
        seq = np.concatenate([ctx, cont])
        logits, _ = fm.apply(fm.params, fm.bias, seq[None, :-1].astype(np.int32))
        logp = np.asarray(jax.nn.log_softmax(np.asarray(logits[0], np.float64), axis=-1))
        out.append(sum(logp[ctx.size - 1 + i, cont[i]] for i in range(cont.size)))
    return out


@pytest.mark.parametrize("which", ["dense", "moe"])
def test_batched_scores_are_each_choices_own_loglikelihood(which, dense_spec, moe_spec):
    fm = build(dense_spec if which == "dense" else moe_spec, 0)
    rows = encode("t", ITEMS, ByteTokenizer(), seq_len=32)
    assert rows.width == 32  # the longest row (167 bytes) capped at the sequence length
    got = row_loglik(make_score(fm), fm.params, fm.bias, rows)
    want = np.concatenate([_one_by_one(fm, item, rows.width) for item in ITEMS])
    # float32 logits summed over a dozen tokens against a float64 sum: about 1e-6 relative apart
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert np.all(want < 0)


def test_metrics_are_len_norm_accuracy_and_bits_per_byte_of_the_right_choice():
    rows = encode("t", ITEMS, ByteTokenizer(), seq_len=64)
    # per character: choice 0 of item 0 (5 chars) beats choice 1 (19 chars) though its total is lower
    ll = np.array([-10.0, -19.5, -6.0,   -3.0, -2.0,   -1.0, -3.0,   -4.0, -4.0])
    m = metrics(rows, ll)
    # item 0: -2.0, -1.03, -2.0 per char -> choice 1 (wrong); item 1: choice 1 (right); item 2: -1/13 vs -3 ->
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
    """A few steps of a real run: every eval row (and the final eval in result.json) carries each task's columns;
    the file task's items are scored, not generated."""
    from ladder.trainers.builtin import train

    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps({"context": i.context, "choices": list(i.choices), "answer": i.answer}) + "\n"
                                 for i in ITEMS))
    data = dataclasses.replace(data_spec, tasks=(TaskSpec("file_task", str(task_file)),
                                                 TaskSpec("cloze", "builtin:heldout_cloze", items=8)))
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
    assert result["final_task_metrics"] == {k: v for k, v in rows[-1].items() if k.startswith("task_")}
