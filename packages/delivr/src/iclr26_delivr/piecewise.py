"""The per-head bias MLP g(b) = W₂·ReLU(W₁b + c₁) + c₂ (1 → hidden → heads), evaluated exactly as the
piecewise-linear function it is.

A scalar-input ReLU MLP is linear between its hidden units' kinks k_m = −c₁ₘ/w₁ₘ: on the segment s it is
g(b) = A_s·b + D_s with A_s = W₂(a_s ⊙ w₁), D_s = W₂(a_s ⊙ c₁) + c₂ and a_s the units active there. Applied
elementwise to the [B, L, L] bias, the MLP form materialises a [B, L, L, hidden] layer (and keeps it for the
backward pass); this form needs one segment index per pair and the (hidden + 1) × heads table, with the same
values and gradients (up to float rounding; at a kink, where ReLU's derivative is a convention, either side's
slope). The joint attention of a 12×12 token grid over T = 5 frames spends most of a training step in the MLP form.
"""

from __future__ import annotations

import torch


class _Apply(torch.autograd.Function):
    """out[:, h] = slope[seg, h]·b + icpt[seg, h]; backward by bincount over the segments."""

    @staticmethod
    def forward(ctx, bias, seg, slope, icpt):
        ctx.save_for_backward(bias, seg, slope)
        ctx.segments = slope.shape[0]
        heads = slope.shape[1]
        outs = [slope[:, h][seg] * bias + icpt[:, h][seg] for h in range(heads)]
        return torch.stack(outs, 1)  # [B, heads, L, L]

    @staticmethod
    def backward(ctx, grad):
        bias, seg, slope = ctx.saved_tensors
        flat_seg, flat_b = seg.flatten(), bias.flatten()
        g_bias = torch.zeros_like(bias) if ctx.needs_input_grad[0] else None
        g_slope, g_icpt = [], []
        for h in range(slope.shape[1]):
            g = grad[:, h]
            if g_bias is not None:
                g_bias = g_bias + g * slope[:, h][seg]
            gf = g.flatten()
            g_slope.append(torch.bincount(flat_seg, gf * flat_b, minlength=ctx.segments))
            g_icpt.append(torch.bincount(flat_seg, gf, minlength=ctx.segments))
        dtype = slope.dtype
        return g_bias, None, torch.stack(g_slope, 1).to(dtype), torch.stack(g_icpt, 1).to(dtype)


def scalar_mlp(bias: torch.Tensor, first: torch.nn.Linear, second: torch.nn.Linear) -> torch.Tensor:
    """g applied to every entry of ``bias`` [B, L, L] -> [B, heads, L, L]; ``first`` = Linear(1, hidden),
    ``second`` = Linear(hidden, heads): the same as ``second(relu(first(bias[..., None]))).permute(0, 3, 1, 2)``."""
    w1, c1 = first.weight[:, 0], first.bias
    with torch.no_grad():
        kinks = -c1 / torch.where(w1 == 0, torch.ones_like(w1), w1)
        kinks = kinks[w1 != 0].sort().values  # units with w₁ = 0 are constant: active or not everywhere
        if len(kinks):
            inner = (kinks[1:] + kinks[:-1]) / 2
            points = torch.cat([kinks[:1] - 1, inner, kinks[-1:] + 1])  # one point inside every segment
        else:
            points = torch.zeros(1, dtype=w1.dtype, device=w1.device)
        active = (points[:, None] * w1[None, :] + c1[None, :] > 0).to(w1.dtype)  # [segments, hidden]
        seg = torch.bucketize(bias.detach().contiguous(), kinks)  # kinks[s−1] < b ≤ kinks[s]
    slope = (active * w1) @ second.weight.T  # [segments, heads]
    icpt = (active * c1) @ second.weight.T + second.bias
    return _Apply.apply(bias, seg, slope, icpt)
