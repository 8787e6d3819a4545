"""Held-out evals: each domain's loss, its standard error over the eval windows and its bits per byte, and their
mixture means, as the contract's eval row names them (``eval_loss``, ``eval_loss/<domain>``, ``bpb``, ...).
The windows are the data pipeline's (``mixture.eval_windows``): every trainer of a ladder scores the same text."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

ROWS_PER_CALL = 32


@torch.no_grad()
def eval_row(model: torch.nn.Module, mixture, eval_tokens: int, device: torch.device) -> dict:
    was_training = model.training
    model.eval()
    row: dict = {}
    tot_loss = tot_bpb = tot_var = 0.0
    for i, dom in enumerate(mixture.domains):
        windows = torch.as_tensor(mixture.eval_windows(i, eval_tokens), dtype=torch.long)
        per_window = []
        for j in range(0, windows.shape[0], ROWS_PER_CALL):
            w = windows[j : j + ROWS_PER_CALL].to(device)
            logits = model(w[:, :-1])
            nll = F.cross_entropy(logits.flatten(0, 1), w[:, 1:].flatten(), reduction="none")
            per_window.append(nll.view(w.shape[0], -1).sum(-1).double().cpu())
        sums = torch.cat(per_window).numpy()
        n, seq = windows.shape[0], windows.shape[1] - 1
        loss = float(sums.sum() / (n * seq))
        se = float(np.std(sums / seq, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
        bpb = float(sums.sum()) / math.log(2) / max(mixture.eval_bytes(i, eval_tokens), 1)
        row[f"eval_loss/{dom.name}"], row[f"bpb/{dom.name}"], row[f"eval_loss_se/{dom.name}"] = loss, bpb, se
        tot_loss += mixture.weights[i] * loss
        tot_bpb += mixture.weights[i] * bpb
        tot_var += (mixture.weights[i] * se) ** 2
    row.update(eval_loss=tot_loss, bpb=tot_bpb, eval_loss_se=math.sqrt(tot_var))
    model.train(was_training)
    return row
