"""Diagnostics: how much attention leaks onto band-masked frame pairs (the official mask-before-MLP pitfall)."""

from __future__ import annotations

import torch

from .bias import band_mask


@torch.no_grad()
def masked_attention_mass(model, frames: torch.Tensor) -> dict[str, float]:
    """Softmax mass on pairs with |t − s| > band, per query: mean and max over blocks, heads and queries.

    With ``mask_after_mlp=True`` it is exactly 0; with the official ``False`` the masked pairs get g(−1e4), an
    unbounded linear extrapolation of the per-head MLP, and this is what leaks.
    """
    was = model.training
    model.eval()
    out = model(frames, output_attentions=True)
    model.train(was)
    t = frames.shape[1]
    n = out.attentions[0].shape[-1] // t
    allowed = band_mask(t, n, model.config.band, device=frames.device)
    leaked = torch.stack([(a * (~allowed)).sum(-1) for a in out.attentions])  # [blocks, B, heads, TN]
    return {"mean": float(leaked.mean()), "max": float(leaked.max())}
