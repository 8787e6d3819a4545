"""What of the contract's model this GPT implements, checked before torch is imported: a run it cannot train
fails in a second with one line naming the field."""

from __future__ import annotations


def check_supported(model: dict) -> str | None:
    """The first field of the contract's model this GPT does not implement, as one line; None when it does."""
    checks = (
        (not model.get("tie_embeddings", True), "model.tie_embeddings: this example GPT ties its embeddings; leave it true"),
        (model.get("qk_norm"), "model.qk_norm: this example GPT has no QK-norm; leave it false"),
        (model.get("z_loss"), "model.z_loss: this example GPT has no z-loss; leave it 0"),
        (model.get("n_shared"), "model.n_shared: this example GPT has no shared experts; leave it 0"),
        (model.get("expert_latent"), "model.expert_latent: this example GPT has no latent experts; leave it 0"),
        (model.get("n_kv_heads") not in (0, None, model["n_heads"]),
         "model.n_kv_heads: this example GPT has no grouped-query attention; leave it 0"),
        (model.get("compute_dtype", "float32") != "float32", "model.compute_dtype: this example GPT trains in float32 only"),
        (model.get("n_experts") and model.get("balancing", "aux_free") not in ("aux_free", "none"),
         f"model.balancing: {model.get('balancing')!r} is not implemented here; use aux_free or none"),
    )
    return next((message for bad, message in checks if bad), None)
