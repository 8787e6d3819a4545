"""One process or a gang, from torch.distributed's own environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``): what the ladder's gang sets for each process, and what ``torchrun`` sets.
Gloo on CPU, NCCL on a GPU; with no ``WORLD_SIZE`` (or 1) no process group at all."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Gang:
    rank: int
    world: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0

    def rows(self, batch: int) -> slice:
        """This process's rows of every global batch of ``batch`` rows."""
        per = batch // self.world
        return slice(self.rank * per, (self.rank + 1) * per)

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` averaged over the gang's processes (one collective); itself in one process."""
        if self.world == 1:
            return values
        out = values.to(self.device).clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out.cpu() / self.world

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def join(batch: int) -> Gang:
    """Join the gang the environment describes (a batch of ``batch`` rows is split evenly over it)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        # Ray makes a gang member's own GPU its only visible one; torchrun leaves them all visible
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world > 1:
        if batch % world:
            raise SystemExit(f"batch_size: {batch} rows do not split over {world} processes; pick a batch they divide")
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
    return Gang(rank, world, device)
