"""Multiple-choice tasks scored at every eval, in OLMo's ranked-classification form.

Each (item, choice) is one row: the context's tokens then the choice's, the row's loss mask on the choice's
tokens only, so one forward pass gives the choice's log-likelihood given the context. An item's prediction is
the choice with the highest log-likelihood per character of its text (OLMo's ``len_norm``: per character, not
per token, so it does not move with the tokenizer); ``task_acc/<task>`` is the share of items it gets right.
``task_bpb/<task>`` is the task loss OLMo's ladder fits: the correct choice's negative log-likelihood in bits
per UTF-8 byte of its text, averaged over items (OLMo's ``bpb``). ``task_acc_se/<task>`` is the accuracy's
binomial standard error over the items.

Shapes are fixed per task (rows of its longest item, capped at the run's sequence length, in calls of a fixed
number of rows, the last one padded with masked rows), so each task compiles one program per run. A context
longer than fits is cut from the left, keeping the tokens nearest the choice; a context that encodes to
nothing conditions on the end-of-text token.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ladder.trainers.builtin.tasks import TaskItem

# Rows go through the model in calls of about this many tokens, as the loss eval's windows do.
TASK_TOKENS_PER_CALL = 8192
ROW_ROUND = 8  # a task's row width rounds up to this, so tasks of similar lengths share a width


@dataclass(frozen=True)
class TaskRows:
    """A task's items as fixed-shape rows: tokens (rows, width + 1) and mask (rows, width) on the choices' targets."""

    name: str
    tokens: np.ndarray
    mask: np.ndarray
    item: np.ndarray  # each row's item
    chars: np.ndarray  # each row's choice, its characters (len_norm's denominator)
    nbytes: np.ndarray  # and its UTF-8 bytes (bits per byte's denominator)
    correct: np.ndarray  # whether the row is its item's right choice
    n_items: int

    @property
    def width(self) -> int:
        return int(self.mask.shape[1])


def encode(name: str, items: list[TaskItem], tokenizer, seq_len: int) -> TaskRows:
    """Rows of ``items`` under ``tokenizer`` for a model of sequence length ``seq_len``."""
    pairs = []
    for item in items:
        ctx = np.asarray(tokenizer.encode(item.context), dtype=np.int64)
        if ctx.size == 0:
            ctx = np.array([tokenizer.eot], dtype=np.int64)
        for choice in item.choices:
            pairs.append((ctx, np.asarray(tokenizer.encode(choice), dtype=np.int64)))
    longest = max(c.size + k.size for c, k in pairs) - 1
    width = min(int(seq_len), -(-longest // ROW_ROUND) * ROW_ROUND)
    tokens = np.zeros((len(pairs), width + 1), dtype=np.int32)
    mask = np.zeros((len(pairs), width), dtype=np.float32)
    for r, (ctx, cont) in enumerate(pairs):
        cont = cont[:width]  # a choice longer than a whole row is scored on its first tokens
        ctx = ctx[-(width + 1 - cont.size):]
        row = np.concatenate([ctx, cont])
        tokens[r, : row.size] = row
        mask[r, ctx.size - 1 : ctx.size - 1 + cont.size] = 1.0  # position t predicts token t + 1
    texts = [(i, c, j == item.answer) for i, item in enumerate(items) for j, c in enumerate(item.choices)]
    return TaskRows(name=name, tokens=tokens, mask=mask, item=np.array([i for i, _, _ in texts]),
                    chars=np.array([len(c) for _, c, _ in texts], dtype=np.float64),
                    nbytes=np.array([len(c.encode("utf-8")) for _, c, _ in texts], dtype=np.float64),
                    correct=np.array([ok for _, _, ok in texts]), n_items=len(items))


def make_score(fm, layout=None) -> Callable:
    """``score(params, bias, tokens, mask)``: each row's summed log-likelihood of its masked targets (jitted)."""
    import jax
    import jax.numpy as jnp

    def score(params, bias, tokens_RxL1, mask_RxL):
        logits, _ = fm.apply(params, bias, tokens_RxL1[:, :-1])
        logits = logits.astype(jnp.float32)
        lse = jax.nn.logsumexp(logits, axis=-1)
        true = jnp.take_along_axis(logits, tokens_RxL1[:, 1:, None], axis=-1)[..., 0]
        return jnp.sum((true - lse) * mask_RxL, axis=-1)

    if layout is None:
        return jax.jit(score)
    jitted = layout.jit_eval(score)
    if not layout.multiprocess:
        return jitted
    return lambda p, b, tokens, mask: jitted(p, b, layout.global_rows(tokens), layout.global_rows(mask))


def row_loglik(score: Callable, params, bias, rows: TaskRows, devices: int = 1) -> np.ndarray:
    """Every row's log-likelihood, in calls of a fixed row count (a multiple of ``devices``)."""
    devices = max(1, int(devices))
    per_call = devices * max(1, TASK_TOKENS_PER_CALL // (devices * rows.width))
    n = rows.tokens.shape[0]
    pad = (-n) % per_call
    tokens = np.concatenate([rows.tokens, np.zeros((pad, rows.width + 1), np.int32)])
    mask = np.concatenate([rows.mask, np.zeros((pad, rows.width), np.float32)])
    out = [np.asarray(score(params, bias, tokens[j : j + per_call], mask[j : j + per_call]))
           for j in range(0, tokens.shape[0], per_call)]
    return np.concatenate(out)[:n].astype(np.float64)


def metrics(rows: TaskRows, loglik: np.ndarray) -> dict[str, float]:
    """``task_acc``, ``task_acc_se`` and ``task_bpb`` of a task from its rows' log-likelihoods."""
    norm = loglik / np.maximum(rows.chars, 1.0)
    right = 0
    for i in range(rows.n_items):
        mine = np.flatnonzero(rows.item == i)
        right += bool(rows.correct[mine[int(np.argmax(norm[mine]))]])  # a tie goes to the first choice
    acc = right / rows.n_items
    bpb = -loglik[rows.correct] / math.log(2) / np.maximum(rows.nbytes[rows.correct], 1.0)
    return {f"task_acc/{rows.name}": acc,
            f"task_acc_se/{rows.name}": math.sqrt(acc * (1 - acc) / rows.n_items),
            f"task_bpb/{rows.name}": float(np.mean(bpb))}


def make_run_tasks(tasks: list[TaskRows], fm, layout=None) -> Callable[..., dict]:
    """``run_tasks(params, bias)``: every task's columns for an eval row ({} without tasks)."""
    if not tasks:
        return lambda p, b: {}
    score = make_score(fm, layout)
    devices = layout.n if layout is not None else 1

    def run_tasks(p, b) -> dict:
        row: dict[str, float] = {}
        for rows in tasks:
            row.update(metrics(rows, row_loglik(score, p, b, rows, devices)))
        return row

    return run_tasks


def task_runner(data, seq_len: int, fm, layout=None, tokenizer_file: str | None = None) -> Callable[..., dict]:
    """``run_tasks(params, bias)`` for ``data.tasks``: their items read or generated once, encoded with the run's
    tokenizer (``tokenizer_file``: the tokenizer.json a ``bpe:`` ladder trained)."""
    if not data.tasks:
        return make_run_tasks([], fm, layout)
    from ladder.trainers.builtin.task_builtin import load_items
    from ladder.trainers.builtin.tokenizer import get_tokenizer

    tokenizer = get_tokenizer(data.tokenizer, tokenizer_file)
    rows = [encode(task.name, load_items(task, data), tokenizer, seq_len) for task in data.tasks]
    return make_run_tasks(rows, fm, layout)
