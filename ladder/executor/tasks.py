"""How a step becomes a Ray task: its task options, the one remote function, and the order the
scheduler starts ready steps in (see ``Step.warm_key``)."""

from __future__ import annotations

from typing import Any

from .context import execute_step
from .hashing import canonical
from .plan import Node
from .step import Step


def warm_ranks(nodes: dict[str, Node]) -> dict[str, int]:
    """0 for the first step (in spec order) of each warm_key and for steps without one, 1 for the
    second of a key, and so on."""
    seen: dict[str, int] = {}
    ranks = {}
    for name, node in nodes.items():
        key = node.step.warm_key
        ranks[name] = seen.get(key, 0) if key else 0
        if key:
            seen[key] = ranks[name] + 1
    return ranks


def task_options(step: Step) -> dict:
    res = canonical(step.resources) if step.resources else {}
    opts: dict[str, Any] = {
        "num_cpus": float(res.get("cpus", 1)),
        "num_gpus": float(res.get("gpus", 0)),
        "max_retries": int(res.get("max_retries", 2)),
        "retry_exceptions": False,
    }
    if res.get("custom"):
        opts["resources"] = {k: float(v) for k, v in res["custom"].items()}
    if res.get("memory"):
        opts["memory"] = float(res["memory"])
    if res.get("env"):  # read when the worker starts (e.g. XLA_FLAGS): Ray gives such a step its own worker
        opts["runtime_env"] = {"env_vars": {k: str(v) for k, v in res["env"].items()}}
    return opts


_remote_fn = None


def remote_fn():
    global _remote_fn
    import ray

    if _remote_fn is None:
        _remote_fn = ray.remote(execute_step)
    return _remote_fn
