"""`DeLiVRConfig`: DeLiVR (arXiv 2509.21719, ICLR 2026) as a `transformers.PretrainedConfig`.

Defaults are the official config file's values (``derain_heavy.yaml``): where the official CLI disagrees
(θ_max 45°, time weight 1.0) the config file wins, and `describe` prints the resolved values.
"""

from __future__ import annotations

from transformers import PretrainedConfig

_CHOICES = {"rotation": ("so2", "so3"), "bias_form": ("relative", "to_base")}


class DeLiVRConfig(PretrainedConfig):
    """Hyper-parameters of the DeLiVR network (spec Method 1–9).

    embed_dim/depth/heads/patch: C = 128, 12 blocks, 8 heads, p = 8 (paper). frames: T (odd) frames per window.
    ffn_ratio: GDFN hidden ratio r = 4.0 (official config). theta_max_deg: the angle bound, 35°.
    rotation: ``so2`` (in-plane, default) or ``so3``. bias_form: ``relative`` ⟨R_t p_i, R_s p_j⟩ (official
    forward pass) or ``to_base`` ⟨R_t p_i, p_j⟩ (the abstract's wording). time_weight/time_kappa: w_time = 0.5,
    κ = 1. tau_init: initial decay τ = 2. band: frames farther apart than this are masked. mask_after_mlp: apply
    the band mask after the per-head MLP (−inf; default) or, as the official code, write −1e4 before it.
    temporal_grad: let gradients flow through the temporal bias (official: no). spatial_bias/temporal_bias/
    decay/band_mask: ablation switches. num_cab: channel-attention blocks in the head (2). stochastic: sample
    the angle head's σ during training (official heavy config: off). return_all_frames: run the head on every
    frame (the official behaviour) instead of the centre frame only.
    """

    model_type = "delivr"

    def __init__(
        self,
        embed_dim: int = 128,
        depth: int = 12,
        heads: int = 8,
        patch: int = 8,
        frames: int = 5,
        ffn_ratio: float = 4.0,
        theta_max_deg: float = 35.0,
        rotation: str = "so2",
        bias_form: str = "relative",
        time_weight: float = 0.5,
        time_kappa: float = 1.0,
        tau_init: float = 2.0,
        band: int = 1,
        mask_after_mlp: bool = True,
        temporal_grad: bool = False,
        spatial_bias: bool = True,
        temporal_bias: bool = True,
        decay: bool = True,
        band_mask: bool = True,
        num_cab: int = 2,
        bias_hidden: int = 16,
        head_hidden: int = 128,
        layerscale_init: float = 1e-4,
        res_scale_init: float = 0.1,
        stochastic: bool = False,
        return_all_frames: bool = False,
        **kwargs,
    ):
        self.embed_dim = int(embed_dim)
        self.depth = int(depth)
        self.heads = int(heads)
        self.patch = int(patch)
        self.frames = int(frames)
        self.ffn_ratio = float(ffn_ratio)
        self.theta_max_deg = float(theta_max_deg)
        self.rotation = rotation
        self.bias_form = bias_form
        self.time_weight = float(time_weight)
        self.time_kappa = float(time_kappa)
        self.tau_init = float(tau_init)
        self.band = int(band)
        self.mask_after_mlp = bool(mask_after_mlp)
        self.temporal_grad = bool(temporal_grad)
        self.spatial_bias = bool(spatial_bias)
        self.temporal_bias = bool(temporal_bias)
        self.decay = bool(decay)
        self.band_mask = bool(band_mask)
        self.num_cab = int(num_cab)
        self.bias_hidden = int(bias_hidden)
        self.head_hidden = int(head_hidden)
        self.layerscale_init = float(layerscale_init)
        self.res_scale_init = float(res_scale_init)
        self.stochastic = bool(stochastic)
        self.return_all_frames = bool(return_all_frames)
        super().__init__(**kwargs)
        self.validate()

    def validate(self) -> None:
        """Raise ValueError with one clear line for an impossible setting."""
        for key, options in _CHOICES.items():
            if getattr(self, key) not in options:
                raise ValueError(f"{key} must be one of {', '.join(options)}, got {getattr(self, key)!r}")
        if not 0 < self.theta_max_deg < 180:
            raise ValueError(f"theta_max_deg must be in (0, 180), got {self.theta_max_deg}")
        if self.frames < 1 or self.frames % 2 == 0:
            raise ValueError(f"frames must be odd, got {self.frames}")
        if min(self.embed_dim, self.depth, self.heads, self.patch, self.num_cab + 1) < 1:
            raise ValueError("embed_dim, depth, heads and patch must be >= 1 and num_cab >= 0")
        if self.embed_dim % self.heads:
            raise ValueError(f"embed_dim ({self.embed_dim}) must be divisible by heads ({self.heads})")
        if self.embed_dim < 8:
            raise ValueError(f"embed_dim must be >= 8 (channel attention reduces by 8), got {self.embed_dim}")
        if self.tau_init <= 0.5:
            raise ValueError(f"tau_init must be > 0.5 (τ = softplus(τ_raw) + 0.5), got {self.tau_init}")
        if self.time_kappa <= 0:
            raise ValueError(f"time_kappa must be > 0, got {self.time_kappa}")

    def describe(self) -> str:
        """One line with the resolved values users ask about (θ_max, time weight, τ, band)."""
        return (
            f"DeLiVR C={self.embed_dim} depth={self.depth} heads={self.heads} p={self.patch} T={self.frames} "
            f"r={self.ffn_ratio:g} rotation={self.rotation} theta_max={self.theta_max_deg:g}deg "
            f"bias={self.bias_form} w_time={self.time_weight:g} kappa={self.time_kappa:g} tau0={self.tau_init:g} "
            f"band={self.band} mask_after_mlp={self.mask_after_mlp}"
        )
