"""Checks of the resources that spread a run over devices, hosts and microbatches (one line per problem)."""

from __future__ import annotations

REMAT_POLICIES = ("none", "dots", "full")


def _int_at_least(problems: list[str], where: str, value, low: int, meaning: str) -> bool:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        problems.append(f"{where}: {value!r} must be an integer >= {low} ({meaning})")
        return False
    return True


def resources_scale(problems: list[str], path: str, r) -> None:
    """``r`` a RungSpec: its batch must split evenly over its processes, each process's devices and its
    microbatches, so every pass of every device sees the same number of whole sequences."""
    res = r.resources
    where = f"{path}.resources"
    ok = _int_at_least(problems, f"{where}.microbatches", res.microbatches, 1, "1: the whole batch in one pass")
    ok &= _int_at_least(problems, f"{where}.processes", res.processes, 1, "1: one process on one host")
    ok &= _int_at_least(problems, f"{where}.expert_parallel", res.expert_parallel, 1, "1: experts not split")
    if res.remat not in REMAT_POLICIES:
        problems.append(f"{where}.remat: {res.remat!r} is not one of {', '.join(REMAT_POLICIES)}")
    frac = res.memory_fraction
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not 0 <= frac <= 1:
        problems.append(f"{where}.memory_fraction: {frac!r} must be a number in [0, 1] (0: JAX's default)")
    if not ok or not isinstance(r.batch_size, int) or r.batch_size <= 0:
        return
    if res.processes == 1 and res.microbatches == 1:  # resources.devices alone: validate.py's own check
        return
    devices = res.devices if isinstance(res.devices, int) and res.devices > 0 else 1
    per_pass = res.processes * devices * res.microbatches
    if r.batch_size % per_pass:
        problems.append(
            f"{path}.batch_size: {r.batch_size} sequences do not split over {res.processes} processes x {devices} "
            f"devices x {res.microbatches} microbatches; make batch_size a multiple of {per_pass}")
