"""The smoke recipe's GPT in PyTorch: RMSNorm pre-norm blocks, RoPE, causal attention, SwiGLU MLPs (dense,
or a routed mixture of experts), tied embeddings, cross-entropy.

The shapes follow the contract's ``model`` (the project's ModelSpec fields); initialisation follows the
built-in trainer's recipe (every matrix N(0, 0.02), residual outputs 0.02 / sqrt(2 * layers), norms at 1),
drawn from torch's generator seeded by the run's seed, so the two trainers start alike but not bit-alike.

The mixture of experts routes as the built-in one does: softmax router probabilities, experts *selected*
by probability plus a per-expert bias (auxiliary-loss-free balancing, DeepSeek-V3's sign update) and
*weighted* by the selected probabilities renormalised over the k choices. It is dropless: every choice is
computed by its expert (the built-in trainer drops choices past an expert's capacity while training).
Every expert runs every step, on the tokens that chose it (none is a 0-row product), so DistributedDataParallel
sees a gradient for every parameter.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

STD = 0.02


def residual_std(n_layers: int) -> float:
    return STD / math.sqrt(2 * n_layers)


def dense_d_ff(model: dict) -> int:
    """The dense SwiGLU width: ``d_ff``, or 8/3 d_model rounded to 8 (the project's default)."""
    return int(model.get("d_ff") or max(8, int(round(model["d_model"] * 8 / 3 / 8)) * 8))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


def rope_tables(seq_len: int, head_dim: int, base: float = 10_000.0):
    half = head_dim // 2
    inv = 1.0 / (base ** (torch.arange(half, dtype=torch.float64) / half))
    ang = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):
    """x (B, H, T, Dh); cos, sin (T, Dh/2): rotate the two halves of each head."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, d: int, n_heads: int, n_layers: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d // n_heads
        self.wqkv = nn.Parameter(torch.empty(d, 3 * d).normal_(0, STD))
        self.wo = nn.Parameter(torch.empty(d, d).normal_(0, residual_std(n_layers)))

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = (x @ self.wqkv).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(b, t, d) @ self.wo


class SwiGLU(nn.Module):
    def __init__(self, d: int, f: int, n_layers: int):
        super().__init__()
        self.w13 = nn.Parameter(torch.empty(d, 2 * f).normal_(0, STD))
        self.w2 = nn.Parameter(torch.empty(f, d).normal_(0, residual_std(n_layers)))

    def forward(self, x):
        a, b = (x @ self.w13).chunk(2, dim=-1)
        return (F.silu(a) * b) @ self.w2


class MoE(nn.Module):
    """Top-k routed SwiGLU experts, dropless; ``loads`` keeps the last forward's share of choices per expert."""

    def __init__(self, model: dict, n_layers: int):
        super().__init__()
        d, e, f = model["d_model"], model["n_experts"], model["expert_d_ff"]
        self.n_experts, self.top_k = e, model["top_k"]
        self.use_bias = model.get("balancing", "aux_free") == "aux_free"
        self.router = nn.Parameter(torch.empty(d, e).normal_(0, STD))
        self.w13 = nn.Parameter(torch.empty(e, d, 2 * f).normal_(0, STD))
        self.w2 = nn.Parameter(torch.empty(e, f, d).normal_(0, residual_std(n_layers)))
        self.register_buffer("bias", torch.zeros(e))  # a buffer: checkpointed, never given a gradient
        self.loads = torch.zeros(e)

    def forward(self, x):
        b, t, d = x.shape
        xs = x.reshape(b * t, d)
        probs = torch.softmax(xs @ self.router, dim=-1)
        scores = (probs + self.bias) if self.use_bias else probs
        idx = torch.topk(scores.detach(), self.top_k, dim=-1).indices  # (N, k)
        gates = probs.gather(-1, idx)
        if self.top_k > 1:
            gates = gates / (gates.sum(-1, keepdim=True) + 1e-9)
        y = torch.zeros_like(xs)
        counts = torch.zeros(self.n_experts)
        for e in range(self.n_experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            counts[e] = tok.numel()
            a, c = (xs[tok] @ self.w13[e]).chunk(2, dim=-1)
            y = y.index_add(0, tok, ((F.silu(a) * c) @ self.w2[e]) * gates[tok, slot, None])
        self.loads = counts / (b * t * self.top_k)
        return y.view(b, t, d)


class Block(nn.Module):
    def __init__(self, model: dict):
        super().__init__()
        d, n_layers = model["d_model"], model["n_layers"]
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, model["n_heads"], n_layers)
        self.mlp = MoE(model, n_layers) if model.get("n_experts") else SwiGLU(d, dense_d_ff(model), n_layers)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    def __init__(self, model: dict, seq_len: int):
        super().__init__()
        self.embed = nn.Parameter(torch.empty(model["vocab"], model["d_model"]).normal_(0, STD))
        self.layers = nn.ModuleList([Block(model) for _ in range(model["n_layers"])])
        self.final_norm = RMSNorm(model["d_model"])
        cos, sin = rope_tables(seq_len, model["d_model"] // model["n_heads"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens):
        """tokens (B, T) -> logits (B, T, V)."""
        t = tokens.shape[1]
        x = F.embedding(tokens, self.embed)
        for layer in self.layers:
            x = layer(x, self.cos[:t], self.sin[:t])
        return self.final_norm(x) @ self.embed.T

    def moes(self) -> list[MoE]:
        return [layer.mlp for layer in self.layers if isinstance(layer.mlp, MoE)]


def update_router_bias(model: GPT, rate: float) -> None:
    """DeepSeek-V3's sign rule on each MoE layer's bias, from the last step's loads (in a gang, the loads
    averaged over its processes first, so every process moves its bias alike)."""
    for moe in model.moes():
        if moe.use_bias:
            moe.bias += rate * torch.sign(moe.loads.mean() - moe.loads)
