"""The peak FLOP/s a run's MFU divides by: the run's device count times one device's datasheet peak.

Datasheet figures are dense (no structured sparsity), per device (one GPU; one TPU chip), for matmuls
with bfloat16 and float32 operands. On a TPU, JAX's default matmul precision runs float32 operands as one
bfloat16 pass, so its float32 peak is its bfloat16 one. A CPU has no datasheet figure: its peak is the
matmul rate measured once per process (:func:`ladder.train.metrics.measured_peak_flops`); the host
devices a CPU run splits into share the process's thread pool, which that measurement already uses
whole, so it is not multiplied by the device count. ``LADDER_PEAK_FLOPS`` overrides the per-device peak.
"""

from __future__ import annotations

import os

# (substring of jax's device_kind, lower-cased; first match wins) -> {dtype: FLOP/s per device}
DATASHEET: tuple[tuple[str, dict[str, float]], ...] = (
    ("gb200", {"bfloat16": 2.5e15, "float32": 80e12}),
    ("b200", {"bfloat16": 2.25e15, "float32": 80e12}),
    ("h200", {"bfloat16": 989.4e12, "float32": 66.9e12}),
    ("h100 pcie", {"bfloat16": 756.5e12, "float32": 51.2e12}),
    ("h100", {"bfloat16": 989.4e12, "float32": 66.9e12}),
    ("a100", {"bfloat16": 312e12, "float32": 19.5e12}),
    ("tpu v5p", {"bfloat16": 459e12, "float32": 459e12}),
    ("tpu v5 lite", {"bfloat16": 197e12, "float32": 197e12}),  # v5e
    ("tpu v5e", {"bfloat16": 197e12, "float32": 197e12}),
    ("tpu v5", {"bfloat16": 459e12, "float32": 459e12}),
    ("tpu v4", {"bfloat16": 275e12, "float32": 275e12}),
)


def datasheet_peak(device_kind: str, dtype: str) -> float | None:
    """One device's datasheet peak for ``dtype`` matmuls, or None when the device is not in the table."""
    kind = device_kind.lower()
    for key, peaks in DATASHEET:
        if key in kind:
            return peaks.get(dtype, peaks["float32"])
    return None


def run_peak_flops(dtype: str, devices: int) -> tuple[float, str]:
    """(peak FLOP/s of a run on ``devices`` devices of this backend, where the figure comes from)."""
    env = os.environ.get("LADDER_PEAK_FLOPS")
    if env:
        return devices * float(env), "LADDER_PEAK_FLOPS"
    import jax

    device = jax.devices()[0]
    peak = datasheet_peak(device.device_kind, dtype)
    if peak is not None:
        return devices * peak, f"datasheet {device.device_kind}"
    from ladder.train.metrics import measured_peak_flops

    return measured_peak_flops(dtype=dtype), f"measured {device.platform}"
