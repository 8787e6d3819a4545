"""JAX/Flax/Optax trainer: one rung spec -> a trained model, metrics files and result.json.

    from ladder.trainers.builtin import train
    result = train(rung, data, "runs/tiny/train-r0")

See :func:`ladder.trainers.builtin.loop.train` for the contract (files, resume, divergence, callbacks).
The names are imported on first use, so jax-free helpers of this package (``hostdevices``) can be
imported before JAX is, which is when XLA reads its flags.
"""

__all__ = ["Callback", "Diverged", "TrainConfigMismatch", "train"]


def __getattr__(name: str):
    if name in __all__:
        from ladder.trainers.builtin import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'ladder.trainers.builtin' has no attribute {name!r}")
