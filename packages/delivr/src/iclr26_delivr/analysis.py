"""Diagnostics: how much attention leaks onto band-masked frame pairs (the official mask-before-MLP pitfall)."""

from __future__ import annotations

import torch

from .bias import band_mask


@torch.no_grad()
def masked_attention_mass(
    model, frames: torch.Tensor, mask_after_mlp: bool | None = None
) -> dict[str, float]:
    """Softmax mass on pairs with |t − s| > band, per query: mean and max over blocks, heads and queries.

    With ``mask_after_mlp=True`` it is exactly 0; with the official ``False`` the masked pairs get g(−1e4), an
    unbounded linear extrapolation of the per-head MLP, and this is what leaks. ``mask_after_mlp`` (None: the
    model's config) sets the order for this measurement only; the model is not changed.
    """
    was = model.training
    model.eval()
    out = model(frames, output_attentions=True, mask_after_mlp=mask_after_mlp)
    model.train(was)
    t = frames.shape[1]
    n = out.attentions[0].shape[-1] // t
    allowed = band_mask(t, n, model.config.band, device=frames.device)
    leaked = torch.stack([(a * (~allowed)).sum(-1) for a in out.attentions])  # [blocks, B, heads, TN]
    return {"mean": float(leaked.mean()), "max": float(leaked.max())}


def angle_gradients(model, frames: torch.Tensor, target: torch.Tensor, weights=None) -> dict[str, float]:
    """Mean |∂L/∂θ_t| over a batch, split into the image terms of the loss (Charbonnier, edge, SSIM, FFT) and the
    angle + Lie-velocity regularisers: frames [B, T, 3, H, W], target [B, 3, H, W] (one batch, eval mode so the
    head's BatchNorm statistics are left as they are; the model's gradients are cleared afterwards).

    The angle head learns from the image terms only through the attention logits; when the regularisers'
    gradient is orders of magnitude larger, they pin the predicted angles (C5's diagnosis).
    """
    from .loss import LossWeights, delivr_loss

    w = weights or LossWeights()
    was = model.training
    model.eval()
    with torch.enable_grad():
        out = model(frames)
        terms = delivr_loss(out, target, w)
        reg = w.angle * terms["angle"] + w.velocity * terms["velocity"]
        image = terms["total"] - reg
        g_image = torch.autograd.grad(image, out.theta, retain_graph=True)[0]
        g_reg = torch.autograd.grad(reg, out.theta, allow_unused=True)[0]
    model.train(was)
    model.zero_grad(set_to_none=True)
    g_reg = torch.zeros_like(g_image) if g_reg is None else g_reg
    return {"image": float(g_image.abs().mean()), "regularisers": float(g_reg.abs().mean())}
