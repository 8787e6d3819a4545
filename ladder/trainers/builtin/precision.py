"""Matmuls in the model's compute dtype: float32, or bfloat16 operands with float32 accumulation.

``ModelSpec.compute_dtype = "bfloat16"`` is mixed precision as Levanter, MaxText and
``torch.autocast`` do it: parameters, optimizer state, norms, softmax, the residual stream and the
loss stay float32; only the operands of the transformer blocks' weight matmuls (and their
cotangents in the backward pass) are rounded to bfloat16, and every product accumulates and returns
float32. Attention scores, the MoE router, the embedding and the output head stay float32 (bf16
logits cost 1.1% in eval loss on a 600-step d96 run; the blocks alone in bf16 were within 0.1%).

Why a custom VJP: on a CPU with AVX512-BF16, XLA's YNNPACK dots run bf16 x bf16 -> f32 at about
twice the float32 rate (`make bench` measures it), but only in the (M,K)x(K,N) and
(M,K)x(N,K) forms with row-major operands. A product that contracts the rows of both operands,
which is what a weight gradient ``x^T g`` is, is silently upcast to float32, slower than float32. So the
backward pass here computes ``dx`` as an (M,N)x(K,N) product and ``dw`` from a *physical* transpose
of ``x`` (a layout constraint: left alone, XLA makes the transpose a free relabelling and the dot is
back in the slow form); the copy costs far less than it saves (334 against 180 GFLOP/s).

In float32 every function here is the plain product the model always used, so float32 runs are
bit-identical to the trainer before this module existed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.layout import Layout, with_layout_constraint


def _row_major_transpose(a: jax.Array) -> jax.Array:
    """``a`` with its last two axes swapped, materialised row-major (not a relabelled view)."""
    return with_layout_constraint(jnp.swapaxes(a, -1, -2), Layout(tuple(range(a.ndim))))


def _product(a: jax.Array, b: jax.Array, a_axis: int, b_axis: int) -> jax.Array:
    """Contract ``a``'s axis ``a_axis`` with ``b``'s ``b_axis`` (counted from the end, -1 or -2),
    with a shared leading batch axis when both are 3-D; float32 result."""
    batch = ((0,), (0,)) if a.ndim == 3 else ((), ())
    dims = (((a.ndim + a_axis,), (b.ndim + b_axis,)), batch)
    return jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.float32)


def _bf16_nn_fwd(x, w):
    xb, wb = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
    return _product(xb, wb, -1, -2), (xb, wb)


@jax.custom_vjp
def _bf16_nn(x, w):
    """x (..., M, K) @ w (..., K, N) with bfloat16 operands -> float32 (..., M, N)."""
    return _bf16_nn_fwd(x, w)[0]


def _bf16_nn_bwd(res, g):
    xb, wb = res
    gb = g.astype(jnp.bfloat16)
    dx = _product(gb, wb, -1, -1)  # g (M,N) . w (K,N) over N
    dw = _product(_row_major_transpose(xb), gb, -1, -2)  # x^T (K,M) @ g (M,N)
    return dx, dw


_bf16_nn.defvjp(_bf16_nn_fwd, _bf16_nn_bwd)


def dot(x_XxK: jax.Array, w_KxN: jax.Array, dtype: str) -> jax.Array:
    """x (..., K) @ w (K, N) -> (..., N) float32."""
    if dtype == "float32":
        return x_XxK @ w_KxN
    return _bf16_nn(x_XxK.reshape(-1, x_XxK.shape[-1]), w_KxN).reshape(*x_XxK.shape[:-1], w_KxN.shape[-1])


def expert_dot(x_ExMxK: jax.Array, w_ExKxN: jax.Array, dtype: str) -> jax.Array:
    """One product per expert: x (E, M, K) @ w (E, K, N) -> (E, M, N) float32."""
    if dtype == "float32":
        return jnp.einsum("emk,ekn->emn", x_ExMxK, w_ExKxN)
    return _bf16_nn(x_ExMxK, w_ExKxN)
