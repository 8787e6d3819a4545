"""Levanter-style observability hooks of the training loop: an object with any of these methods."""

from __future__ import annotations

from typing import Protocol


class Callback(Protocol):
    """Levanter-style hooks; every method is optional."""

    def on_step(self, step: int, row: dict) -> None: ...

    def on_eval(self, step: int, row: dict) -> None: ...

    def on_checkpoint(self, step: int) -> None: ...

    def on_end(self, result: dict) -> None: ...


def call_hooks(callbacks, name: str, *args) -> None:
    for cb in callbacks:
        fn = getattr(cb, name, None)
        if fn is not None:
            fn(*args)
