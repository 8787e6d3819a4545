"""AdamW as the built-in trainer's optax chain computes it: clip the gradients by their global norm, Adam's
bias-corrected moments, decoupled weight decay on the decayed groups, then the step scaled by the step's rate
times its group's multiplier.

Written out instead of ``torch.optim.AdamW``: the same update, but torch's optimizers import ``torch._dynamo``
on their first call, a start-up cost as large as importing torch itself, paid by every run of a ladder.
"""

from __future__ import annotations

import math

import torch


class AdamW:
    def __init__(self, groups: list[dict], *, b1: float, b2: float, eps: float, grad_clip: float):
        """``groups``: each ``{"params": [...], "mult": LR multiplier, "weight_decay": ...}``."""
        self.groups = groups
        self.b1, self.b2, self.eps, self.grad_clip = float(b1), float(b2), float(eps), float(grad_clip or 0.0)
        self.t = 0
        self.m = [[torch.zeros_like(p) for p in g["params"]] for g in groups]
        self.v = [[torch.zeros_like(p) for p in g["params"]] for g in groups]

    def params(self) -> list[torch.Tensor]:
        return [p for g in self.groups for p in g["params"]]

    @torch.no_grad()
    def step(self, lr: float) -> dict:
        """One update at rate ``lr``; the gradients' norm before clipping and the update's norm."""
        grads = [p.grad for p in self.params()]
        grad_norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        scale = min(1.0, self.grad_clip / grad_norm) if self.grad_clip > 0 and grad_norm > 0 else 1.0
        self.t += 1
        c1, c2 = 1 - self.b1**self.t, 1 - self.b2**self.t
        sq = torch.zeros((), device=grads[0].device)
        for g, ms, vs in zip(self.groups, self.m, self.v, strict=True):
            rate, decay = lr * g["mult"], g["weight_decay"]
            for p, m, v in zip(g["params"], ms, vs, strict=True):
                grad = p.grad * scale if scale != 1.0 else p.grad
                m.mul_(self.b1).add_(grad, alpha=1 - self.b1)
                v.mul_(self.b2).addcmul_(grad, grad, value=1 - self.b2)
                update = (m / c1) / ((v / c2).sqrt_() + self.eps)
                if decay:
                    update.add_(p, alpha=decay)
                update.mul_(-rate)
                sq += update.pow(2).sum()
                p.add_(update)
                p.grad = None
        return {"grad_norm": grad_norm, "update_norm": math.sqrt(float(sq))}

    def state_dict(self) -> dict:
        return {"t": self.t, "m": self.m, "v": self.v}

    def load_state_dict(self, state: dict) -> None:
        self.t = int(state["t"])
        for mine, saved in ((self.m, state["m"]), (self.v, state["v"])):
            for ms, ss in zip(mine, saved, strict=True):
                for m, s in zip(ms, ss, strict=True):
                    m.copy_(s)
