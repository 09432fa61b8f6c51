"""The DeLiVR network as a `transformers.PreTrainedModel` (spec Method 1–9).

Module names follow the official implementation (``embed.stem``, ``so3_head``, ``blocks.i.attn.nonlinear_bias``,
``gdfn``, ``refinement``, ``depatch``, ``res_scale``, ``tau_raw``), so `convert.py` maps official weights by name.
Input frames [B, T, 3, H, W] in [0, 1] (the official code stacks them as [B, 3T, H, W]: ``x.view(B, T, 3, H, W)``
is the same tensor); output the restored centre frame [B, 3, H, W].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .bias import lie_bias, tau_from_raw, tau_raw_init
from .config import DeLiVRConfig
from .lie import bounded_rotation, so2_matrix
from .piecewise import scalar_mlp


@dataclass
class DeLiVROutput(ModelOutput):
    restored: torch.Tensor | None = None  # [B, 3, H, W] restored centre frame
    theta: torch.Tensor | None = None  # [B, T] rotation angle ‖ω_t‖ (SO(2): signed θ_t), radians
    omega: torch.Tensor | None = None  # [B, T, 3] rotation vectors
    velocity: torch.Tensor | None = None  # [B, T-1] Lie velocity
    all_frames: torch.Tensor | None = None  # [B, T, 3, H, W] with config.return_all_frames
    attentions: tuple[torch.Tensor, ...] | None = None  # per block [B, heads, TN, TN] with output_attentions


class DeepPatchEmbed(nn.Module):
    """Per-frame stem conv3×3–GELU–conv3×3 at full resolution, then the patch conv (kernel = stride = p)."""

    def __init__(self, c: int, patch: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.GELU(), nn.Conv2d(c, c, 3, padding=1))
        self.proj = nn.Conv2d(c, c, patch, stride=patch)


class SO3Head(nn.Module):
    """Angle head: conv–BN–GELU–conv–GELU → GAP → Linear(C→128)–GELU–Linear(128→6) (zero-initialised)."""

    def __init__(self, c: int, hidden: int):
        super().__init__()
        self.pre_process = nn.Sequential(
            nn.Conv2d(c, c, 3, padding=1),
            nn.BatchNorm2d(c),
            nn.GELU(),
            nn.Conv2d(c, c, 3, padding=1),
            nn.GELU(),
        )
        self.net = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, hidden), nn.GELU(), nn.Linear(hidden, 6)
        )

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        """feat [BT, C, H', W'] -> [BT, 6] = (μ, log σ)."""
        return self.net(self.pre_process(feat))


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """fp16/bf16 -> fp32 (other dtypes unchanged): the Lie part runs in full precision under autocast."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class NonLinearLieBias(nn.Module):
    """g: R → R^h, g(b) = W₂·ReLU(W₁b + c₁) + c₂, applied elementwise to the bias [B, L, L] -> [B, h, L, L]."""

    def __init__(self, heads: int, hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, heads))

    def forward(self, bias: torch.Tensor) -> torch.Tensor:
        # the same function as self.mlp(bias.unsqueeze(-1)).permute(0, 3, 1, 2), evaluated piecewise-linearly
        # without the [B, L, L, hidden] layer (piecewise.py; tested against the MLP form)
        return scalar_mlp(bias, self.mlp[0], self.mlp[2])


class LieAttention(nn.Module):
    """Joint multi-head attention over all T·N tokens with the additive float mask g(B) + M (SDPA)."""

    def __init__(self, c: int, heads: int, bias_hidden: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.nonlinear_bias = NonLinearLieBias(heads, bias_hidden)

    def forward(
        self,
        x: torch.Tensor,
        bias: torch.Tensor,
        mask: torch.Tensor | None,
        after: bool,
        weights: bool = False,
        override: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``override`` [heads, TN, TN]: a precomputed additive bias (mask included) used instead of g(B)."""
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        if override is not None:  # another per-head bias in place of the Lie bias (`DeLiVR.bias_override`)
            add = override
        else:  # g(B) in fp32 even under autocast: bias differences between tokens are ~1e-2 (bf16 keeps 3 digits)
            with torch.autocast(x.device.type, enabled=False):
                bias = full_precision(bias)
                if mask is None:
                    add = self.nonlinear_bias(bias)
                elif after:  # ours: g(B) first, then −inf (dtype min) on pairs with |t − s| > band
                    add = self.nonlinear_bias(bias).masked_fill(~mask, torch.finfo(bias.dtype).min)
                else:  # the official code: −1e4 written into B before g, so masked pairs get g(−1e4)
                    add = self.nonlinear_bias(bias.masked_fill(~mask, -1e4))
        add = add.to(q.dtype) if add.dtype != q.dtype else add
        if weights:
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + add, dim=-1)
            out = att @ v
        else:
            att, out = None, F.scaled_dot_product_attention(q, k, v, attn_mask=add)
        return self.proj(out.transpose(1, 2).reshape(b, n, c)), att


class GDFN(nn.Module):
    """Gated depthwise feed-forward, per frame on its (C, H', W') map: 1×1 → dw3×3 → GELU(a)⊙b → 1×1."""

    def __init__(self, c: int, ratio: float):
        super().__init__()
        hidden = int(c * ratio)
        self.project_in = nn.Conv2d(c, 2 * hidden, 1)
        self.dwconv = nn.Conv2d(2 * hidden, 2 * hidden, 3, padding=1, groups=2 * hidden)
        self.project_out = nn.Conv2d(hidden, c, 1)

    def forward(self, x: torch.Tensor, frames: int, grid: tuple[int, int]) -> torch.Tensor:
        b, n, c = x.shape
        h, w = grid
        m = x.view(b * frames, h * w, c).transpose(1, 2).reshape(b * frames, c, h, w)
        a, g = self.dwconv(self.project_in(m)).chunk(2, dim=1)
        y = self.project_out(F.gelu(a) * g)
        return y.flatten(2).transpose(1, 2).reshape(b, n, c)


class LieTransformerBlock(nn.Module):
    """Pre-LN: x += γ₁⊙Attn(LN x); x += γ₂⊙GDFN(LN x); LayerScale γ initialised to 1e-4."""

    def __init__(self, cfg: DeLiVRConfig):
        super().__init__()
        c = cfg.embed_dim
        self.norm1 = nn.LayerNorm(c)
        self.attn = LieAttention(c, cfg.heads, cfg.bias_hidden)
        self.norm2 = nn.LayerNorm(c)
        self.gdfn = GDFN(c, cfg.ffn_ratio)
        self.gamma1 = nn.Parameter(torch.full((c,), cfg.layerscale_init))
        self.gamma2 = nn.Parameter(torch.full((c,), cfg.layerscale_init))

    def forward(self, x, bias, mask, after, frames, grid, weights=False, override=None):
        res, att = self.attn(self.norm1(x), bias, mask, after, weights, override)
        x = x + self.gamma1 * res
        x = x + self.gamma2 * self.gdfn(self.norm2(x), frames, grid)
        return x, att


class CAB(nn.Module):
    """Channel attention block: conv3×3–GELU–conv3×3, squeeze-excite (reduction 8), residual."""

    def __init__(self, c: int, reduction: int = 8):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GELU(), nn.Conv2d(c, c, 3, padding=1))
        self.ca = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(c, c // reduction, 1),
            nn.ReLU(),
            nn.Conv2d(c // reduction, c, 1),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = self.body(x)
        return x + self.ca(r) * r


class SmoothUpsample(nn.Module):
    """conv3×3 (C → 3p²) → PixelShuffle(p) → conv3×3 (3 → 3)."""

    def __init__(self, c: int, patch: int):
        super().__init__()
        self.conv = nn.Conv2d(c, 3 * patch * patch, 3, padding=1)
        self.upsample = nn.PixelShuffle(patch)
        self.smooth = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.smooth(self.upsample(self.conv(x)))


def check_frames(frames: torch.Tensor) -> None:
    """One clear ValueError for input that is not [B, T, 3, H, W] with odd T and finite values."""
    if frames.ndim != 5:
        raise ValueError(f"frames must be [B, T, 3, H, W], got shape {tuple(frames.shape)}")
    if frames.shape[2] != 3:
        raise ValueError(f"frames must have 3 channels (RGB), got {frames.shape[2]}")
    if frames.shape[1] % 2 == 0:
        raise ValueError(f"frames must be odd (a centre frame), got T={frames.shape[1]}")
    if not bool(torch.isfinite(frames).all()):
        raise ValueError("frames contain NaN or inf values")


def pad_to_multiple(x: torch.Tensor, p: int) -> tuple[torch.Tensor, tuple[int, int]]:
    """Reflect-pad the last two dims of [..., H, W] up to multiples of p (replicate where reflect cannot)."""
    h, w = x.shape[-2:]
    ph, pw = (-h) % p, (-w) % p
    if ph == 0 and pw == 0:
        return x, (h, w)
    lead = x.shape[:-3]
    flat = x.reshape(-1, *x.shape[-3:])
    mode = "reflect" if ph < h and pw < w else "replicate"
    flat = F.pad(flat, (0, pw, 0, ph), mode=mode)
    return flat.reshape(*lead, *flat.shape[-3:]), (h, w)


class DeLiVRPreTrainedModel(PreTrainedModel):
    config_class = DeLiVRConfig
    base_model_prefix = "delivr"
    main_input_name = "frames"

    def _init_weights(self, module: nn.Module) -> None:  # keep torch's defaults; zero the angle head's output
        if isinstance(module, SO3Head):
            nn.init.zeros_(module.net[-1].weight)
            nn.init.zeros_(module.net[-1].bias)


class DeLiVR(DeLiVRPreTrainedModel):
    """DeLiVR: a transformer over the patch tokens of T frames with the differential Lie bias in every block."""

    def __init__(self, config: DeLiVRConfig):
        super().__init__(config)
        # optional module(frames=T, grid=(H', W')) -> [heads, TN, TN] that replaces the Lie bias in every block
        # (the peers bench swaps in ALiBi / a relative-position table); not a config field, None by default
        self.bias_override: nn.Module | None = None
        c = config.embed_dim
        self.embed = DeepPatchEmbed(c, config.patch)
        self.so3_head = SO3Head(c, config.head_hidden)
        self.tau_raw = nn.Parameter(torch.tensor(tau_raw_init(config.tau_init)))
        self.blocks = nn.ModuleList(LieTransformerBlock(config) for _ in range(config.depth))
        self.refinement = nn.Sequential(*(CAB(c) for _ in range(config.num_cab)))
        self.depatch = SmoothUpsample(c, config.patch)
        self.res_scale = nn.Parameter(torch.full((1,), config.res_scale_init))
        self.post_init()
        nn.init.zeros_(self.so3_head.net[-1].weight)
        nn.init.zeros_(self.so3_head.net[-1].bias)

    @property
    def tau(self) -> torch.Tensor:
        """τ = softplus(τ_raw) + 0.5 (≥ 0.5), shared by all blocks."""
        return tau_from_raw(self.tau_raw)

    def rotations(self, feat: torch.Tensor, b: int, t: int, angles: torch.Tensor | None = None):
        """Per-frame bounded rotations from the patch maps feat [BT, C, H', W'] -> (R [B,T,3,3], ω, θ), fp32.
        ``angles`` [B, T] (radians): given in-plane angles used instead of the head's (the oracle arm of
        `reproduce`: θ_t := the generator's true φ_t); the head is then not run."""
        if angles is not None:
            theta = angles.to(device=feat.device, dtype=torch.float32).view(b, t)
            zero = torch.zeros_like(theta)
            return so2_matrix(theta), torch.stack([zero, zero, theta], -1), theta
        out = full_precision(self.so3_head(feat).view(b, t, 6))
        mu, log_sigma = out[..., :3], out[..., 3:]
        if self.config.stochastic and self.training:
            mu = mu + log_sigma.exp().clamp(1e-6, 10.0) * torch.randn_like(mu)
        return bounded_rotation(mu, math.radians(self.config.theta_max_deg), self.config.rotation)

    def forward(
        self,
        frames: torch.Tensor,
        output_attentions: bool = False,
        mask_after_mlp: bool | None = None,
        angles: torch.Tensor | None = None,
        **_,
    ) -> DeLiVROutput:
        """frames [B, T, 3, H, W] (T odd) -> `DeLiVROutput` with the restored centre frame [B, 3, H, W].

        ``mask_after_mlp`` overrides the config's mask order for this call only (None: the config's); ``angles``
        [B, T] (radians, SO(2)) replace the angle head's θ_t (an oracle); the rotations, the Lie bias and the
        per-head MLP g run in fp32 under autocast."""
        cfg = self.config
        after = cfg.mask_after_mlp if mask_after_mlp is None else bool(mask_after_mlp)
        check_frames(frames)
        b, t = frames.shape[:2]
        x, (h0, w0) = pad_to_multiple(frames, cfg.patch)
        h, w = x.shape[-2:]
        c = cfg.embed_dim
        feat = self.embed.proj(self.embed.stem(x.reshape(b * t, 3, h, w)))  # [BT, C, H', W']
        grid = feat.shape[-2:]
        n = grid[0] * grid[1]
        rot, omega, theta = self.rotations(feat, b, t, angles)
        with torch.autocast(feat.device.type, enabled=False):
            lb = lie_bias(
                rot,
                grid,
                bias_form=cfg.bias_form,
                time_weight=cfg.time_weight,
                time_kappa=cfg.time_kappa,
                tau=self.tau,
                band=cfg.band,
                spatial=cfg.spatial_bias,
                temporal=cfg.temporal_bias,
                decay=cfg.decay,
                use_band_mask=cfg.band_mask,
                temporal_grad=cfg.temporal_grad,
            )
        mask = lb.mask if cfg.band_mask else None
        bias = lb.bias
        override = None
        if self.bias_override is not None:  # [heads, TN, TN], broadcast over the batch; band mask after
            override = self.bias_override(frames=t, grid=(int(grid[0]), int(grid[1]))).to(feat.dtype)
            if mask is not None:
                override = override.masked_fill(~mask, torch.finfo(feat.dtype).min)
        shortcut = feat.flatten(2).transpose(1, 2).reshape(b, t * n, c)
        tokens, atts = shortcut, []
        for blk in self.blocks:
            tokens, att = blk(tokens, bias, mask, after, t, grid, output_attentions, override)
            atts.append(att)
        tokens = (tokens + shortcut).view(b, t, n, c)
        sel = range(t) if cfg.return_all_frames else [(t - 1) // 2]
        maps = tokens[:, list(sel)].reshape(-1, n, c).transpose(1, 2).reshape(-1, c, *grid)
        residual = self.depatch(self.refinement(maps)).view(b, len(sel), 3, h, w)
        restored = (x[:, list(sel)] + self.res_scale * residual)[..., :h0, :w0]
        centre = restored[:, (t - 1) // 2] if cfg.return_all_frames else restored[:, 0]
        return DeLiVROutput(
            restored=centre,
            theta=theta if cfg.rotation == "so2" or angles is not None else omega.norm(dim=-1),
            omega=omega,
            velocity=lb.velocity,
            all_frames=restored if cfg.return_all_frames else None,
            attentions=tuple(atts) if output_attentions else None,
        )

    def memory_estimate(self, height: int, width: int, batch: int = 1) -> int:
        """Bytes of one block's joint-attention tensors (bias MLP hidden + logits) for a [batch, T, 3, H, W] input."""
        p = self.config.patch
        tokens = self.config.frames * math.ceil(height / p) * math.ceil(width / p)
        per = self.config.bias_hidden + 2 * self.config.heads
        return 4 * batch * tokens * tokens * per
