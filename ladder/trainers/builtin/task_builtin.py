"""Built-in tasks: multiple-choice items generated from the ladder's own held-out text, never downloaded.

``builtin:heldout_cloze``: the context is a window of a domain's held-out text ending at a word start; the
right choice is the text that follows it, the others are spans that follow the same last ``KEY_CHARS``
characters elsewhere in the domain's held-out text. Every choice then fits the context's last characters, so
only a model that reads further back tells them apart, and a larger model reads further: accuracy rises with
scale above chance (1 / CHOICES), as experiments/tasks_record.md measures (``python -m bench.task_rise``). The items are split
evenly over the domains, the right choice's position is balanced over the items, and the draw is a function of
(the held-out text, the task's ``seed`` and ``items``) only, so every run of a ladder scores the same items.

A task is registered once, in ladder.trainers.builtin.tasks.BUILTIN_TASKS (its name and its function here).
"""

from __future__ import annotations

import functools

import numpy as np

from ladder.spec import DataSpec, TaskSpec
from ladder.trainers.builtin.tasks import BUILTIN_TASKS, TaskError, TaskItem, is_builtin, read_file

CONTEXT_CHARS = 48
CHOICE_CHARS = 12
CHOICES = 4
KEY_CHARS = 1  # the context's last characters every choice follows somewhere in the held-out text
DEFAULT_ITEMS = 256
SEP = "\0"  # between documents: no window or span crosses one


@functools.lru_cache(maxsize=8)
def heldout_text(source: str, heldout_frac: float) -> str:
    """A domain's held-out documents (those the runs evaluate on and never train on), joined by SEP."""
    from ladder.trainers.builtin.data import documents, is_heldout

    return SEP.join(text.replace(SEP, " ") for name, text in documents(source) if text and is_heldout(name, heldout_frac))


def cloze_items(text: str, n: int, rng: np.random.Generator, answers: np.ndarray, *, context: int = CONTEXT_CHARS,
                choice: int = CHOICE_CHARS, key: int = KEY_CHARS) -> list[TaskItem]:
    """``n`` cloze items from ``text``; item i's right choice goes at index ``answers[i]``."""
    n_choices = CHOICES
    code = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    sep = np.cumsum(code == ord(SEP))  # documents numbered: a context and its choice lie in one document
    pos = np.arange(context + 1, code.size - choice)
    starts = pos[np.isin(code[pos - 1], (ord(" "), ord("\n"))) & ~np.isin(code[pos], (ord(" "), ord("\n")))]
    starts = starts[sep[starts - context - 1] == sep[starts + choice - 1]]
    if starts.size == 0:
        raise TaskError("builtin:heldout_cloze: a domain's held-out text has no window to draw from; "
                        "raise data.heldout_frac or add text")
    keys = np.zeros(starts.size, dtype=np.int64)
    for j in range(key):
        keys = keys * (1 << 21) + code[starts - key + j]
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    items: list[TaskItem] = []
    tries = 0
    while len(items) < n:
        tries += 1
        if tries > 50 * n:
            raise TaskError(f"builtin:heldout_cloze: found {len(items)} of {n} items with {n_choices - 1} distinct "
                            "distractors; lower the task's items or raise data.heldout_frac")
        p = int(starts[rng.integers(starts.size)])
        right = text[p : p + choice]
        k = keys[np.searchsorted(starts, p)]
        lo, hi = np.searchsorted(sorted_keys, k, "left"), np.searchsorted(sorted_keys, k, "right")
        pool = starts[order[lo:hi]]
        others: list[str] = []
        for q in rng.permutation(pool):
            span = text[int(q) : int(q) + choice]
            if span != right and span not in others:
                others.append(span)
            if len(others) == n_choices - 1:
                break
        if len(others) < n_choices - 1:
            continue
        a = int(answers[len(items)])
        choices = others[:a] + [right] + others[a:]
        items.append(TaskItem(context=text[p - context : p], choices=tuple(choices), answer=a))
    return items


def heldout_cloze(task: TaskSpec, data: DataSpec) -> list[TaskItem]:
    n = int(task.items) or DEFAULT_ITEMS
    rng = np.random.default_rng([int(task.seed), n])
    answers = rng.permutation(np.arange(n) % CHOICES)  # each position right equally often
    counts = [n // len(data.domains) + (i < n % len(data.domains)) for i in range(len(data.domains))]
    items: list[TaskItem] = []
    for i, (dom, count) in enumerate(zip(data.domains, counts, strict=True)):
        text = heldout_text(dom.source, float(data.heldout_frac))
        items += cloze_items(text, count, np.random.default_rng([int(task.seed), n, i]), answers[len(items):],
                             context=CONTEXT_CHARS, choice=CHOICE_CHARS, key=KEY_CHARS)
    return items


def generate(task: TaskSpec, data: DataSpec) -> list[TaskItem]:
    if task.source not in BUILTIN_TASKS:
        raise TaskError(f"{task.source}: unknown built-in task; one of {', '.join(BUILTIN_TASKS)}")
    return globals()[BUILTIN_TASKS[task.source]](task, data)


def load_items(task: TaskSpec, data: DataSpec) -> list[TaskItem]:
    """The items a run scores for ``task``: its file's, or the built-in's drawn from ``data``'s held-out split."""
    return generate(task, data) if is_builtin(task) else read_file(task.source, task.items)
