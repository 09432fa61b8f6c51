"""The modality encoders: a ViT over visible image patches and a Perceiver over visible genes.

Both compress one cell into L latent tokens of width D. Masked tokens are removed *before* encoding (MAE-style).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import ViTConfig
from transformers.models.vit.modeling_vit import ViTLayer

from .config import PetriConfig


def vit_config(cfg: PetriConfig) -> ViTConfig:
    """The `transformers` ViT block settings shared by every attention stack of PETRI."""
    vc = ViTConfig(
        hidden_size=cfg.hidden_size,
        num_attention_heads=cfg.num_heads,
        intermediate_size=cfg.mlp_ratio * cfg.hidden_size,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        layer_norm_eps=1e-6,
    )
    vc._attn_implementation = "sdpa"
    return vc


def vit_stack(cfg: PetriConfig, depth: int) -> nn.ModuleList:
    vc = vit_config(cfg)
    return nn.ModuleList(ViTLayer(vc) for _ in range(depth))


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """[n, C, H, W] -> [n, N, C*P*P]: patches row-major; inside a patch, channel-major (channel c's pixels
    are the slice c*P*P:(c+1)*P*P)."""
    n, c, h, w = images.shape
    x = images.reshape(n, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(n, (h // patch) * (w // patch), c * patch * patch)


def gather_visible(
    mask: torch.Tensor | None, n_tokens: int, n: int, device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices [n, V] of the visible tokens (``mask`` True = masked), visible first in index order, and the
    key-padding mask [n, V] (True = padding) for rows with fewer than V visible tokens."""
    if mask is None:
        idx = torch.arange(n_tokens, device=device).expand(n, n_tokens)
        return idx, torch.zeros(n, n_tokens, dtype=torch.bool, device=device)
    visible = ~mask
    counts = visible.sum(1)
    order = torch.argsort((~visible).to(torch.int8), dim=1, stable=True)
    v = int(counts.max())
    idx = order[:, :v]
    pad = torch.arange(v, device=device)[None, :] >= counts[:, None]
    return idx, pad


class ImageEncoder(nn.Module):
    """ViT (``transformers`` ``ViTLayer`` blocks) over the visible patches + learned positional embeddings
    (*inferred*), with L learnable latent tokens appended; returns the L latents after the blocks [n, L, D]."""

    def __init__(self, cfg: PetriConfig) -> None:
        super().__init__()
        self.patch = cfg.patch_size
        d, n = cfg.hidden_size, cfg.n_patches
        self.proj = nn.Linear(cfg.n_channels * cfg.patch_size**2, d)
        self.pos = nn.Parameter(torch.zeros(1, n, d))
        self.latents = nn.Parameter(torch.zeros(1, cfg.n_latents, d))
        self.blocks = vit_stack(cfg, cfg.image_layers)
        self.norm = nn.LayerNorm(d, eps=1e-6)

    def _petri_init(self) -> None:
        nn.init.normal_(self.pos, std=0.02)
        nn.init.normal_(self.latents, std=0.02)

    def forward(self, images: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``images`` [n, C, H, W] (already z-scored), ``mask`` [n, N] bool (True = dropped) -> [n, L, D]."""
        tokens = self.proj(patchify(images, self.patch)) + self.pos
        n, n_tok, d = tokens.shape
        idx, pad = gather_visible(mask, n_tok, n, tokens.device)
        tokens = torch.gather(tokens, 1, idx[..., None].expand(-1, -1, d))
        lat = self.latents.expand(n, -1, -1)
        x = torch.cat([tokens, lat], dim=1)
        attn = None
        if pad.any():  # additive mask [n, 1, 1, T]: padded keys get -inf
            keypad = torch.cat([pad, torch.zeros(n, lat.shape[1], dtype=torch.bool, device=pad.device)], 1)
            attn = torch.zeros(keypad.shape, dtype=x.dtype, device=x.device).masked_fill(
                keypad, float("-inf")
            )
            attn = attn[:, None, None, :]
        for blk in self.blocks:
            x = blk(x, attn)
        return self.norm(x[:, -lat.shape[1] :])


class CrossAttention(nn.Module):
    """Pre-LN cross-attention of latents (queries) to tokens (keys/values) with a key-padding mask, then an MLP."""

    def __init__(self, d: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.ln_q, self.ln_kv, self.ln_mlp = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, mlp_ratio * d), nn.GELU(), nn.Linear(mlp_ratio * d, d))

    def forward(self, lat: torch.Tensor, tokens: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
        kv = self.ln_kv(tokens)
        lat = lat + self.attn(self.ln_q(lat), kv, kv, key_padding_mask=pad, need_weights=False)[0]
        return lat + self.mlp(self.ln_mlp(lat))


class ExpressionEncoder(nn.Module):
    """Perceiver over the visible genes: token_g = MLP₂([e_g ; log1p(x_g)]) (concatenation *inferred*); L latents
    alternate cross-attention to the tokens (key-padding masks for variable counts) and self-attention."""

    def __init__(self, cfg: PetriConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.gene_emb = nn.Parameter(torch.zeros(cfg.n_genes, d))
        self.token_mlp = nn.Sequential(nn.Linear(d + 1, d), nn.GELU(), nn.Linear(d, d))
        self.latents = nn.Parameter(torch.zeros(1, cfg.n_latents, d))
        self.cross = nn.ModuleList(
            CrossAttention(d, cfg.num_heads, cfg.mlp_ratio) for _ in range(cfg.perceiver_rounds)
        )
        self.selfs = vit_stack(cfg, cfg.perceiver_rounds)
        self.norm = nn.LayerNorm(d, eps=1e-6)

    def _petri_init(self) -> None:
        nn.init.normal_(self.gene_emb, std=0.02)
        nn.init.normal_(self.latents, std=0.02)

    def forward(self, values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``values`` [n, n_genes] (log1p counts or log-normalised), ``mask`` [n, n_genes] bool -> [n, L, D]."""
        n, g = values.shape
        idx, pad = gather_visible(mask, g, n, values.device)
        vals = torch.gather(values, 1, idx)
        tokens = self.token_mlp(torch.cat([self.gene_emb[idx], vals[..., None]], dim=-1))
        lat = self.latents.expand(n, -1, -1)
        key_pad = pad if pad.any() else None
        for cross, self_blk in zip(self.cross, self.selfs, strict=True):
            lat = self_blk(cross(lat, tokens, key_pad))
        return self.norm(lat)
