"""The peak FLOP/s a run's MFU divides by: the run's device count times one device's datasheet peak.

Datasheet figures are dense (no structured sparsity), per device (one GPU; one TPU chip), for matmuls
with bfloat16 and float32 operands. On a TPU, JAX's default matmul precision runs float32 operands as one
bfloat16 pass, so its float32 peak is its bfloat16 one. A CPU has no datasheet figure: its peak is the
matmul rate measured once per process (:func:`ladder.trainers.builtin.metrics.measured_peak_flops`); the host
devices a CPU run splits into share the process's thread pool, which that measurement already uses
whole, so it is not multiplied by the device count. ``LADDER_PEAK_FLOPS`` overrides the per-device peak.
"""

from __future__ import annotations

import os

# name (what `ladder plan --accelerator` takes), substrings of jax's device_kind (lower-cased; the first
# entry with a match wins), {dtype: FLOP/s per device}. One table for MFU here and for `ladder plan`'s prices.
DATASHEET: tuple[tuple[str, tuple[str, ...], dict[str, float]], ...] = (
    ("GB200", ("gb200",), {"bfloat16": 2.5e15, "float32": 80e12}),
    ("B200", ("b200",), {"bfloat16": 2.25e15, "float32": 80e12}),
    ("H200", ("h200",), {"bfloat16": 989.4e12, "float32": 66.9e12}),
    ("H100-PCIe", ("h100 pcie",), {"bfloat16": 756.5e12, "float32": 51.2e12}),
    ("H100", ("h100",), {"bfloat16": 989.4e12, "float32": 66.9e12}),
    ("A100", ("a100",), {"bfloat16": 312e12, "float32": 19.5e12}),
    ("TPUv6e", ("tpu v6 lite", "tpu v6e"), {"bfloat16": 918e12, "float32": 918e12}),
    ("TPUv5e", ("tpu v5 lite", "tpu v5e"), {"bfloat16": 197e12, "float32": 197e12}),
    ("TPUv5p", ("tpu v5p", "tpu v5"), {"bfloat16": 459e12, "float32": 459e12}),
    ("TPUv4", ("tpu v4",), {"bfloat16": 275e12, "float32": 275e12}),
)
ACCELERATORS = tuple(name for name, _, _ in DATASHEET)


def datasheet_peak(device_kind: str, dtype: str) -> float | None:
    """One device's datasheet peak for ``dtype`` matmuls, or None when the device is not in the table."""
    kind = device_kind.lower()
    for _, keys, peaks in DATASHEET:
        if any(key in kind for key in keys):
            return peaks.get(dtype, peaks["float32"])
    return None


def accelerator_peak(name: str, dtype: str = "bfloat16") -> float:
    """The datasheet peak of the accelerator ``name`` (one of ``ACCELERATORS``), what `ladder plan` prices with."""
    return next(peaks.get(dtype, peaks["float32"]) for n, _, peaks in DATASHEET if n == name)


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
    from ladder.trainers.builtin.metrics import measured_peak_flops

    return measured_peak_flops(dtype=dtype), f"measured {device.platform}"
