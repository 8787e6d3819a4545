"""Trainers: what turns one resolved run into metrics, evals, checkpoints and a result.

``builtin`` is the project's own JAX trainer. Every trainer, the built-in one included, is reached
through the same contract (``ladder.trainers.contract``, docs/trainers.md).
"""
