"""JAX/Flax/Optax trainer: one rung spec -> a trained model, metrics files and result.json.

    from ladder.train import train
    result = train(rung, data, "runs/tiny/train-r0")

See :func:`ladder.train.loop.train` for the contract (files, resume, divergence, callbacks).
"""

from ladder.train.loop import Callback, Diverged, train

__all__ = ["Callback", "Diverged", "train"]
