"""A PyTorch GPT trained through the ladder's trainer contract (docs/trainers.md): one run from the contract's
input JSON, its rows written through the contract's writer, checkpoints in the run's checkpoint folder.

    python examples/torch_gpt/train.py --config run.json        # or with $LADDER_RUN_CONFIG set

One process, or a gang (DistributedDataParallel over gloo on CPU, NCCL on a GPU) from torch.distributed's
environment. Restarted on the same output directory it resumes from the newest checkpoint and reproduces the
uninterrupted run's losses (a batch is a pure function of the seed and its step). SIGTERM: the processes agree
on a step, the first checkpoints there and all end by the signal, as the ladder's stop asks.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time
from pathlib import Path

from supported import check_supported

from ladder.trainers.writer import RunWriter, lr_at, read_run


class Stop:
    """SIGTERM sets a flag; the loop checks it after every step (a gang ors it over its processes)."""

    def __init__(self):
        self.flag = False
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, signum, frame):
        self.flag = True

    @staticmethod
    def reraise():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


def param_groups(model, optimizer: dict) -> list[dict]:
    """The built-in trainer's groups: matrices and the embedding decayed, norms and the router not, each group
    with its LR multiplier."""
    groups: dict[str, list] = {"norm": [], "router": [], "embed": [], "matrix": []}
    for name, p in model.named_parameters():
        leaf = name.split(".")[-1]
        groups[{"scale": "norm", "router": "router", "embed": "embed"}.get(leaf, "matrix")].append(p)
    mult = {"norm": optimizer["norm_lr_mult"], "router": optimizer["router_lr_mult"],
            "embed": optimizer["embed_lr_mult"], "matrix": 1.0}
    decay = float(optimizer["weight_decay"])
    return [{"params": ps, "mult": float(mult[g]), "weight_decay": decay if g in ("embed", "matrix") else 0.0}
            for g, ps in groups.items() if ps]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="the contract's input JSON for this run (default: $LADDER_RUN_CONFIG)")
    run = read_run(parser.parse_args(argv).config)
    problem = check_supported(run["model"])
    if problem:
        print(f"torch_gpt: {problem}", file=sys.stderr)
        return 2
    import dist_env  # torch: imported once the run is known to be one this GPT trains

    gang = dist_env.join(int(run["batch_size"]))
    stop = Stop()
    try:
        return train(run, gang, stop)
    finally:
        gang.close()


def train(run: dict, gang, stop: Stop) -> int:
    import adamw
    import ckpt
    import data_source
    import evals
    import gpt
    import torch
    import torch.nn.functional as F

    t0 = time.perf_counter()
    total, batch_size, seq_len = int(run["steps"]), int(run["batch_size"]), int(run["seq_len"])
    torch.manual_seed(int(run["seed"]))
    model = gpt.GPT(run["model"], seq_len).to(gang.device)
    o = run["optimizer"]
    opt = adamw.AdamW(param_groups(model, o), b1=o["b1"], b2=o["b2"], eps=o["eps"], grad_clip=o["grad_clip"])
    ckpt_dir = Path(run["checkpoint"]["dir"])
    resumed = ckpt.load_newest(ckpt_dir, model, opt) if run["resume"] else None
    start = resumed["step"] if resumed else 0
    print(f"[torch_gpt] {run['name']}: rank {gang.rank} of {gang.world} on {gang.device}, "
          f"{f'resuming from step {start}' if resumed else 'starting at step 0'} of {total}", flush=True)
    carried = resumed or {"wall_s": 0.0, "loss_sum": 0.0, "loss_n": 0}
    mixture = data_source.open_data(run)
    ev = run["eval"]
    eval_steps, ckpt_steps = set(ev["steps"]), set(run["checkpoint"]["steps"])
    separate_final = int(ev["final_tokens_per_domain"]) != int(ev["tokens_per_domain"])
    writer = RunWriter(run, resume_step=start)
    net = model
    if gang.world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gang.device.index] if gang.device.type == "cuda" else None)
    rows = gang.rows(batch_size)
    params = list(model.parameters())
    bias_rate = float(run["model"].get("bias_update_rate", 1e-3))
    tokens_per_step = int(run["tokens_per_step"])
    state = {"loss_sum": carried["loss_sum"], "loss_n": carried["loss_n"], "log_t": time.perf_counter(), "log_step": start}

    def wall() -> float:
        return carried["wall_s"] + time.perf_counter() - t0

    def save(step: int) -> None:
        if gang.main:
            ckpt.save(ckpt_dir, step, model, opt, {"wall_s": wall(), "loss_sum": state["loss_sum"], "loss_n": state["loss_n"]})

    def eval_row(tokens: int) -> dict:
        return evals.eval_row(model, mixture, tokens, gang.device)

    for step in range(start, total):
        done = step + 1
        logged = done % int(run["log_every"]) == 0 or done == total
        lr = lr_at(run["lr_schedule"], step)
        batch = torch.as_tensor(mixture.batch(step, batch_size, rows), dtype=torch.long).to(gang.device)
        logits = net(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        norms = opt.step(lr)
        # One collective a step: the loss, the stop flag and the experts' loads, averaged over the gang.
        moes = model.moes()
        shared = gang.mean(torch.cat([loss.detach().reshape(1).cpu(), torch.tensor([float(stop.flag)]),
                                      *[m.loads for m in moes]]))
        for i, m in enumerate(moes):
            m.loads = shared[2 + i * m.n_experts : 2 + (i + 1) * m.n_experts]
        gpt.update_router_bias(model, bias_rate)
        loss_value = float(shared[0])
        if not math.isfinite(loss_value):
            writer.event(done, "divergence", metric="loss", value=loss_value,
                         message=f"loss became non-finite at step {done} (lr {lr:g})")
            writer.close()
            print(f"torch_gpt: loss became non-finite at step {done} (lr {lr:g}); lower optimizer.lr or raise warmup",
                  file=sys.stderr)
            return 1
        state["loss_sum"] += loss_value
        state["loss_n"] += 1
        if logged:
            now = time.perf_counter()
            extra = {}
            for i, m in enumerate(moes):
                extra[f"router_bias_norm_l{i}"] = float(m.bias.norm())
            if gang.device.type == "cuda":
                extra["gpu_peak_memory_bytes"] = torch.cuda.max_memory_allocated(gang.device)
            if moes:
                extra["expert_load_max_over_mean"] = float(sum(m.loads.max() * m.n_experts for m in moes) / len(moes))
                extra["drop_rate"] = 0.0  # dropless
            writer.metrics(done, loss_value, loss_mean=state["loss_sum"] / state["loss_n"], lr=lr,
                           objective=loss_value, param_norm=_norm(params), **norms,
                           tokens_per_s=(done - state["log_step"]) * tokens_per_step / max(now - state["log_t"], 1e-9),
                           wall_s=wall(), **extra)
            state.update(loss_sum=0.0, loss_n=0, log_t=now, log_step=done)
        if shared[1] > 0:  # a SIGTERM reached some process: all stop at this step, the first checkpoints it
            save(done)
            writer.close()
            stop.reraise()
            return 143
        if done in eval_steps or done == total:
            if gang.main:
                row = eval_row(int(ev["tokens_per_domain"]))
                writer.eval(done, row.pop("eval_loss"), **row)
            gang.barrier()
        if done in ckpt_steps or done == total:
            save(done)
    final_missing = not (Path(run["out_dir"]) / "final_eval.json").exists()
    if separate_final and gang.main and final_missing:
        row = eval_row(int(ev["final_tokens_per_domain"]))
        writer.final_eval(total, row.pop("eval_loss"), **row)
    writer.close()
    return 0


def _norm(tensors) -> float:
    import torch

    return float(torch.linalg.vector_norm(torch.stack([t.detach().norm() for t in tensors])))


if __name__ == "__main__":
    sys.exit(main())
