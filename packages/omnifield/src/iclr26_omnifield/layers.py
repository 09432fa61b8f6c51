"""The building blocks: bias-free multi-head attention with key-padding masks, the GEGLU feed-forward, the
cascaded encoder block E_{m,k} and the crosstalk trunk layer."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    """Multi-head attention, queries [B, Nq, q_dim] over keys [B, Nk, kv_dim]; Q/K/V without bias.

    ``key_mask`` [B, Nk] (True = attend). A row whose keys are all masked attends to nothing and returns 0 (the
    caller masks such rows out downstream), never NaN.
    """

    def __init__(self, q_dim: int, kv_dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads, self.dim_head = heads, dim_head
        self.to_q = nn.Linear(q_dim, inner, bias=False)
        self.to_kv = nn.Linear(kv_dim, 2 * inner, bias=False)
        self.to_out = nn.Linear(inner, q_dim)

    def forward(
        self, x: torch.Tensor, ctx: torch.Tensor, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        b, nq, _ = x.shape
        nk = ctx.shape[1]
        q = self.to_q(x).view(b, nq, self.heads, self.dim_head).transpose(1, 2)
        k, v = self.to_kv(ctx).view(b, nk, 2, self.heads, self.dim_head).permute(2, 0, 3, 1, 4)
        mask = None
        empty = None
        if key_mask is not None:
            empty = ~key_mask.any(dim=1)  # [B]
            safe = key_mask | empty[:, None]  # all-masked rows attend to everything (then zeroed)
            mask = safe[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = out.transpose(1, 2).reshape(b, nq, self.heads * self.dim_head)
        out = self.to_out(out)
        if empty is not None and bool(empty.any()):
            out = out.masked_fill(empty[:, None, None], 0.0)
        return out


class GEGLUFeedForward(nn.Module):
    """FF(x) = Linear(4d→d)(a·GELU(b)), [a, b] = Linear(d→8d)(x)."""

    def __init__(self, dim: int, mult: int = 4) -> None:
        super().__init__()
        self.w_in = nn.Linear(dim, 2 * mult * dim)
        self.w_out = nn.Linear(mult * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.w_in(x).chunk(2, dim=-1)
        return self.w_out(a * F.gelu(b))


class CascadedBlock(nn.Module):
    """E_{m,k}(X, R): Λ ← Λ + CrossAttn(LN Λ, LN X); Λ ← Λ + R; Λ ← Λ + SelfAttn(LN Λ); Λ ← Λ + FF(LN Λ)."""

    def __init__(
        self, d: int, n: int, token_dim: int, cross_heads: int, self_heads: int, dim_head: int
    ) -> None:
        super().__init__()
        self.latents = nn.Parameter(torch.zeros(n, d))
        self.ln_lat = nn.LayerNorm(d)
        self.ln_tok = nn.LayerNorm(token_dim)
        self.cross = Attention(d, token_dim, cross_heads, dim_head)
        self.ln_self = nn.LayerNorm(d)
        self.self_attn = Attention(d, d, self_heads, dim_head)
        self.ln_ff = nn.LayerNorm(d)
        self.ff = GEGLUFeedForward(d)

    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor:
        lat = self.latents.unsqueeze(0).expand(tokens.shape[0], -1, -1)
        lat = lat + self.cross(self.ln_lat(lat), self.ln_tok(tokens), mask)
        if residual is not None:
            lat = lat + residual
        h = self.ln_self(lat)
        lat = lat + self.self_attn(h, h)
        return lat + self.ff(self.ln_ff(lat))


class TrunkLayer(nn.Module):
    """One pre-norm crosstalk layer: x ← x + SelfAttn(LN x) (masked keys), x ← x + FF(LN x)."""

    def __init__(self, d: int, heads: int, dim_head: int) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(d)
        self.attn = Attention(d, d, heads, dim_head)
        self.ln_ff = nn.LayerNorm(d)
        self.ff = GEGLUFeedForward(d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln_attn(x)
        x = x + self.attn(h, h, mask)
        return x + self.ff(self.ln_ff(x))
