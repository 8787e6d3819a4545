"""The steps a run evaluates and checkpoints at: one rule for the built-in trainer and the contract's input."""

from __future__ import annotations


def cadence(total_steps: int, every: int, n: int) -> frozenset[int]:
    """The steps a run evaluates (or saves) at, the end included.

    An explicit ``every`` is kept as given (its multiples, then the end). A count ``n`` means n points
    spaced evenly and ending on the last step: multiples of ``total // n`` put one a step or two before
    the end as well (rung_1's 1,596 steps evaluated at 1,595 and 1,596), an eval, a checkpoint and a
    forecast snapshot for nothing.
    """
    if every:
        return frozenset(range(every, total_steps, every)) | {total_steps}
    n = max(1, min(int(n), total_steps))
    return frozenset(max(1, round(total_steps * k / n)) for k in range(1, n + 1))
