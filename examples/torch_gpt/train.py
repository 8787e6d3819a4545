"""A PyTorch GPT trained through the ladder's trainer contract (docs/trainers.md): one run from the contract's
input JSON, its rows written through the contract's writer, checkpoints under the run's output directory.

    python examples/torch_gpt/train.py --config run.json

One process, or a gang (DistributedDataParallel over gloo on CPU, NCCL on a GPU) from torch.distributed's
environment. Restarted on the same output directory it resumes from the newest checkpoint and reproduces the
uninterrupted run's losses (a batch is a pure function of the seed and its step). SIGTERM: the processes agree
on a step, the first checkpoints there and all exit by the signal, as the ladder's stop asks.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time

import ckpt
import dist_env
import evals
import gpt
import lr_schedule
import rows as rows_lib
import run_config
import torch
import torch.nn.functional as F


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


def param_groups(model: torch.nn.Module, optim: dict) -> list[dict]:
    """The built-in trainer's groups: norms and the router undecayed, each group its own LR multiplier."""
    groups = {"norm": [], "router": [], "embed": [], "matrix": []}
    for name, p in model.named_parameters():
        leaf = name.split(".")[-1]
        group = "norm" if leaf == "scale" else "router" if leaf == "router" else "embed" if leaf == "embed" else "matrix"
        groups[group].append(p)
    mult = {"norm": optim.get("norm_lr_mult", 1.0), "router": optim.get("router_lr_mult", 1.0),
            "embed": optim.get("embed_lr_mult", 1.0), "matrix": 1.0}
    decay = float(optim.get("weight_decay", 0.0))
    return [{"params": ps, "mult": float(mult[g]), "weight_decay": decay if g in ("embed", "matrix") else 0.0}
            for g, ps in groups.items() if ps]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the contract's input JSON for this run")
    args = parser.parse_args(argv)
    cfg = run_config.load(args.config)
    problem = gpt.check_supported(cfg.model)
    if problem:
        print(f"torch_gpt: {problem}", file=sys.stderr)
        return 2
    gang = dist_env.join(cfg.batch_size)
    stop = Stop()
    try:
        return train(cfg, gang, stop)
    finally:
        gang.close()


def train(cfg: run_config.RunConfig, gang: dist_env.Gang, stop: Stop) -> int:
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    model = gpt.GPT(cfg.model, cfg.seq_len).to(gang.device)
    optim = cfg.optim
    opt = torch.optim.AdamW(param_groups(model, optim), lr=cfg.lr, betas=(optim.get("b1", 0.9), optim.get("b2", 0.95)),
                            eps=optim.get("eps", 1e-8))
    resumed = ckpt.load_newest(cfg.out, model, opt) if cfg.resume else None
    start = resumed["step"] if resumed else 0
    carried = resumed or {"wall_s": 0.0, "loss_sum": 0.0, "loss_n": 0}
    writer = rows_lib.open_rows(cfg, start, gang.main)
    if start >= cfg.total_steps and writer.finished():
        writer.close()
        return 0
    net = model
    if gang.world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[gang.device.index] if gang.device.type == "cuda" else None)
    mixture = cfg.mixture()
    rows = gang.rows(cfg.batch_size)
    params = [p for p in model.parameters()]
    tokens_per_step = cfg.batch_size * cfg.seq_len
    state = {"loss_sum": carried["loss_sum"], "loss_n": carried["loss_n"], "log_t": time.perf_counter(), "log_step": start}

    def wall() -> float:
        return carried["wall_s"] + time.perf_counter() - t0

    def save(step: int) -> None:
        if gang.main:
            ckpt.save(cfg.out, step, model, opt, {"wall_s": wall(), "loss_sum": state["loss_sum"], "loss_n": state["loss_n"]})

    for step in range(start, cfg.total_steps):
        logged = (step + 1) % cfg.log_every == 0 or step + 1 == cfg.total_steps
        lr = lr_schedule.lr_at(step, cfg.total_steps, cfg.lr, cfg.schedule)
        for group in opt.param_groups:
            group["lr"] = lr * group["mult"]
        batch = torch.as_tensor(mixture.batch(step, cfg.batch_size, rows), dtype=torch.long).to(gang.device)
        logits = net(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_clip = float(optim.get("grad_clip", 0.0))
        grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else math.inf)
        before = [p.detach().clone() for p in params] if logged else None
        opt.step()
        moes = model.moes()
        shared = gang.mean(torch.cat([loss.detach().reshape(1).cpu(), torch.tensor([float(stop.flag)]),
                                      *[m.loads for m in moes]]))
        for i, m in enumerate(moes):
            m.loads = shared[2 + i * m.n_experts : 2 + (i + 1) * m.n_experts]
        gpt.update_router_bias(model, float(cfg.model.get("bias_update_rate", 1e-3)))
        loss_value = float(shared[0])
        if not math.isfinite(loss_value):
            writer.diverged(step + 1, loss_value)
            writer.close()
            print(f"torch_gpt: loss became non-finite at step {step + 1} (lr {cfg.lr:g}); lower the lr", file=sys.stderr)
            return 1
        state["loss_sum"] += loss_value
        state["loss_n"] += 1
        done = step + 1
        if logged:
            now = time.perf_counter()
            row = {"step": done, "loss": loss_value, "loss_mean": state["loss_sum"] / state["loss_n"], "lr": lr,
                   "grad_norm": float(grad_norm), "objective": loss_value,
                   "param_norm": float(torch.linalg.vector_norm(torch.stack([p.detach().norm() for p in params]))),
                   "update_norm": float(torch.linalg.vector_norm(torch.stack([(p.detach() - b).norm()
                                                                              for p, b in zip(params, before, strict=True)]))),
                   "tokens_per_s": (done - state["log_step"]) * tokens_per_step / max(now - state["log_t"], 1e-9),
                   "wall_s": wall()}
            if moes:
                for i, m in enumerate(moes):
                    row[f"router_bias_norm_l{i}"] = float(m.bias.norm())
                row["expert_load_max_over_mean"] = float(sum(m.loads.max() * m.n_experts for m in moes) / len(moes))
                row["drop_rate"] = 0.0  # dropless
            writer.metrics(row)
            state.update(loss_sum=0.0, loss_n=0, log_t=now, log_step=done)
        if shared[1] > 0:  # a SIGTERM reached some process: all stop here, the first checkpoints
            save(done)
            writer.close()
            stop.reraise()
            return 143
        if done in cfg.eval_steps or done == cfg.total_steps:
            if gang.main:
                writer.eval(evals.eval_row(model, mixture, done, cfg.eval_tokens, gang.device))
            gang.barrier()
        if done in cfg.checkpoint_steps or done == cfg.total_steps:
            save(done)
    if gang.main:
        final = evals.eval_row(model, mixture, cfg.total_steps, cfg.final_tokens, gang.device)
        writer.final(final, wall_s=wall())
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
