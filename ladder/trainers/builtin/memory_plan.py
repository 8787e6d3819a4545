"""Where a rung computes, before it runs: its devices, hosts, sequences per pass and an estimate of
each device's peak memory (what `ladder plan` shows, and what bench/gpu_check.sh checks against).

The estimate counts the train state (float32 parameters, gradients and Adam's two moments: 16 bytes a
parameter, split over the devices under FSDP, a MoE's experts over the expert axis) plus one pass's
activations kept for the backward: per token and layer, the residual stream and norms in float32, the
projections' outputs in the compute dtype, the attention scores unless the run is on a GPU in bfloat16
(cuDNN's flash attention keeps only a log-sum-exp per head), and the MLP's (a MoE's routed experts at
their capacity); per token, the float32 logits and their gradient. ``remat`` keeps less: ``full`` only
each block's input (one block's activations live again during its backward), ``dots`` only the matmul
outputs. It leaves out XLA's temporary buffers and fragmentation: the GPU check prints how far off it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.spec import RungSpec

STATE_BYTES_PER_PARAM = 16  # float32 parameter, gradient, Adam mu and nu


@dataclass(frozen=True)
class RungLayout:
    processes: int
    devices_per_process: int
    microbatches: int
    rows_per_pass: int  # sequences each device takes in one pass
    state_bytes: float  # per device
    activation_bytes: float  # per device, one pass

    @property
    def devices(self) -> int:
        return self.processes * self.devices_per_process

    @property
    def memory_bytes(self) -> float:
        return self.state_bytes + self.activation_bytes


def local_devices(rung: RungSpec) -> int:
    """Devices each process of ``rung`` trains on, as the trainer will pick them (``parallel.device_count``)."""
    from ladder.trainers.builtin.hostdevices import host_device_count

    res = rung.resources
    if res.devices:
        return int(res.devices)
    have = max(1, int(res.gpus)) if res.gpus > 0 else host_device_count(res)
    batch = rung.batch_size if isinstance(rung.batch_size, int) else 1
    per_process = max(1, batch // max(1, res.processes * res.microbatches))
    return max(n for n in range(1, have + 1) if per_process % n == 0)


def activation_bytes_per_token(rung: RungSpec, flash: bool) -> float:
    m = rung.model
    d, t, layers = m.d_model, rung.seq_len, m.n_layers
    a = 2 if m.compute_dtype == "bfloat16" else 4
    kv = (m.n_kv_heads or m.n_heads) * m.head_dim
    if m.is_moe:
        f = (m.top_k * m.capacity_factor * m.expert_d_ff + m.n_shared * (m.shared_d_ff or m.expert_d_ff))
    else:
        f = m.dense_d_ff
    scores = 4 * m.n_heads * (1 if flash else t)  # float32 softmax rows (about half masked blocks, kept twice)
    matmuls = a * ((d + 2 * kv) + d + 2 * f + d)  # qkv, attention output, w13, w2
    elementwise = 4 * 6 * d + a * 2 * f  # residual, norms, rotary q/k; silu(a) * b
    per_layer = {"none": matmuls + elementwise + scores, "dots": matmuls + 4 * d, "full": 4 * d}[rung.resources.remat]
    one_block = matmuls + elementwise + scores if rung.resources.remat != "none" else 0
    logits = 4 * m.vocab * 3  # float32 logits, softmax and gradient
    return layers * per_layer + one_block + logits


def rung_layout(rung: RungSpec) -> RungLayout:
    res = rung.resources
    per_process = local_devices(rung)
    devices = res.processes * per_process
    batch = rung.batch_size if isinstance(rung.batch_size, int) else 0
    rows = max(1, batch // (devices * res.microbatches)) if batch else 0
    m = rung.model
    expert_params = 0
    if m.is_moe:
        expert_params = m.n_layers * m.n_experts * 3 * (m.expert_latent or m.d_model) * m.expert_d_ff
    other_params = m.params_total - expert_params
    if res.parallel == "fsdp":
        state = STATE_BYTES_PER_PARAM * m.params_total / devices
    else:
        state = STATE_BYTES_PER_PARAM * (other_params + expert_params / max(1, res.expert_parallel))
    flash = res.gpus > 0 and m.compute_dtype == "bfloat16"
    act = rows * rung.seq_len * activation_bytes_per_token(rung, flash)
    return RungLayout(processes=res.processes, devices_per_process=per_process, microbatches=res.microbatches,
                      rows_per_pass=rows, state_bytes=state, activation_bytes=act)
