"""`OmniField`: the conditioned neural field F(x, τ | any subset of modality point clouds) → ŷ_m.

Shapes: a modality's `SensorSet` holds coords [B, N, C], values [B, N], mask [B, N]; queries are [B, Q, C] with
horizons τ (a float, [B] or [B, Q]); ``forward`` returns {m: [B, Q]} for every target modality, including
modalities that have no sensors (cross-modal prediction).

ICMR (paper Eq. 1): z⁽⁰⁾ = 0; for stage k, Λ_m⁽ᵏ⁾ = E_{m,k}(X_m, reshape(W_{m,k} z⁽ᵏ⁾)) (no R at k = 0; every
stage re-reads the raw tokens), h⁽ᵏ⁾ = P(concat_m Λ_m⁽ᵏ⁾) with the trunk P shared across stages, and
z⁽ᵏ⁺¹⁾ = token-mean of h⁽ᵏ⁾ over present modalities; the decoders read g = h⁽ℓ⁻¹⁾.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel

from iclr26_core.errors import UserError

from .config import OmniFieldConfig
from .gff import GaussianFourierFeatures, sinusoid_table
from .layers import Attention, CascadedBlock, GEGLUFeedForward, TrunkLayer


@dataclass
class SensorSet:
    """One modality's sensors: coords [B, N, C], values [B, N], mask [B, N] (True = observed; None = all).

    NaN values are masked automatically; a sample whose sensors are all masked lacks the modality.
    """

    coords: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor | None = None

    def valid(self) -> torch.Tensor:
        ok = ~torch.isnan(self.values)
        if self.mask is not None:
            ok = ok & self.mask.bool()
        return ok


class _LinearCoords(nn.Module):
    """The no-GFF ablation: γ replaced by a learned linear map of the raw coordinates."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(in_dim, out_dim)
        self.out_dim = out_dim

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.proj(p)


class ByModality(nn.ModuleList):
    """Modules indexed by position (state-dict keys ``0``, ``1``, ...) and looked up by modality name, so that any
    name a user writes ("PM2.5", "NO₂", "wind speed") works: `nn.ModuleDict` refuses "." in keys."""

    def __init__(self, names, modules) -> None:
        super().__init__(modules)
        self.names = list(names)

    def __getitem__(self, key):
        return super().__getitem__(self.names.index(key) if isinstance(key, str) else key)


class Decoder(nn.Module):
    """D_m: x = q + CrossAttn(LN q, LN g); x += FF(LN x) if decoder_ff; ŷ = Linear(x → 1)."""

    def __init__(self, cfg: OmniFieldConfig) -> None:
        super().__init__()
        qd, d = cfg.query_dim, cfg.d_latent
        self.ln_q, self.ln_g = nn.LayerNorm(qd), nn.LayerNorm(d)
        self.cross = Attention(qd, d, cfg.cross_heads, cfg.dim_head)
        self.ln_ff = nn.LayerNorm(qd) if cfg.decoder_ff else None
        self.ff = GEGLUFeedForward(qd) if cfg.decoder_ff else None
        self.head = nn.Linear(qd, 1)

    def forward(self, q: torch.Tensor, g: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = q + self.cross(self.ln_q(q), self.ln_g(g), mask)
        if self.ff is not None:
            x = x + self.ff(self.ln_ff(x))
        return self.head(x).squeeze(-1)


class OmniField(PreTrainedModel):
    """OmniField (arXiv 2511.02205): see the module docstring. Checkpoints via ``save_pretrained``."""

    config_class = OmniFieldConfig
    base_model_prefix = "omnifield"
    main_input_name = "queries"

    def __init__(self, config: OmniFieldConfig) -> None:
        super().__init__(config)
        c = config
        ns, sig_s = c.gff_space
        nt, sig_t = c.gff_time
        if c.gff:
            self.gamma_x = GaussianFourierFeatures(c.coord_dim, ns, sig_s, c.two_pi, seed=c.gff_seed)
            self.gamma_t = GaussianFourierFeatures(1, nt, sig_t, c.two_pi, seed=c.gff_seed + 1)
        else:
            self.gamma_x = _LinearCoords(c.coord_dim, 2 * ns)
            self.gamma_t = _LinearCoords(1, 2 * nt)
        d, n = c.d_latent, c.n_latents
        mods = c.modalities
        self.tokenizers = ByModality(
            mods,
            (
                nn.Sequential(
                    nn.Linear(c.coord_dim + 1, c.token_width),
                    nn.GELU(),
                    nn.Linear(c.token_width, c.token_width),
                )
                for _ in mods
            ),
        )
        L = c.effective_stages
        self.encoders = ByModality(
            mods,
            (
                nn.ModuleList(
                    CascadedBlock(d, n, c.token_dim, c.cross_heads, c.self_heads, c.dim_head)
                    for _ in range(L)
                )
                for _ in mods
            ),
        )
        z_keys = ["shared"] if c.shared_z_proj else list(mods)
        self.z_proj = nn.ModuleList(
            ByModality(z_keys, (nn.Linear(d, n * d) for _ in z_keys)) for _ in range(max(L - 1, 0))
        )
        self.trunk = nn.ModuleList(TrunkLayer(d, c.self_heads, c.dim_head) for _ in range(c.trunk_layers))
        self.decoders = ByModality(mods, (Decoder(c) for _ in mods))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, CascadedBlock):
            with torch.no_grad():
                if self.config.sin_init:
                    module.latents.copy_(sinusoid_table(*module.latents.shape))
                else:
                    module.latents.normal_(0.0, 0.02)

    # ----------------------------------------------------------------------------------------- helpers
    def _check(self, inputs: Mapping[str, SensorSet], queries: torch.Tensor, targets: Sequence[str]) -> None:
        known = set(self.config.modalities)
        for m in [*inputs, *targets]:
            if m not in known:
                raise UserError(
                    f"unknown modality {m!r}; this model knows {', '.join(self.config.modalities)}"
                )
        C = self.config.coord_dim
        if queries.ndim != 3 or queries.shape[-1] != C:
            raise UserError(f"queries must be [batch, n_queries, {C}], got {list(queries.shape)}")
        for m, s in inputs.items():
            if s.coords.ndim != 3 or s.coords.shape[-1] != C:
                raise UserError(
                    f"coordinates of {m!r} must be [batch, n_sensors, {C}], got {list(s.coords.shape)}"
                )
            if s.values.shape != s.coords.shape[:2]:
                raise UserError(f"values of {m!r} must be [batch, n_sensors] = {list(s.coords.shape[:2])}")

    def tokens(self, m: str, s: SensorSet) -> tuple[torch.Tensor, torch.Tensor]:
        """[MLP_m(x, u); γ(x)] with masked entries zeroed (garbage never reaches the arithmetic) and the mask."""
        valid = s.valid()
        x = torch.where(valid[..., None], s.coords, torch.zeros_like(s.coords))
        u = torch.where(valid, s.values, torch.zeros_like(s.values))
        tok = torch.cat([self.tokenizers[m](torch.cat([x, u[..., None]], dim=-1)), self.gamma_x(x)], dim=-1)
        return tok, valid

    def encode(self, inputs: Mapping[str, SensorSet]) -> tuple[torch.Tensor, torch.Tensor]:
        """ICMR over the present modalities: g [B, M'·n, d] and its key mask [B, M'·n]."""
        present = [m for m in self.config.modalities if m in inputs]
        toks = {m: self.tokens(m, inputs[m]) for m in present}
        present = [m for m in present if bool(toks[m][1].any())]
        if not present:
            raise UserError("at least one input modality is required")
        n = self.config.n_latents
        blocks_mask = torch.cat([toks[m][1].any(dim=1, keepdim=True).expand(-1, n) for m in present], dim=1)
        weight = blocks_mask.float()[..., None]
        z = None
        h = None
        for k in range(self.config.effective_stages):
            lats = []
            for m in present:
                R = None
                if k > 0:
                    W = self.z_proj[k - 1]["shared" if self.config.shared_z_proj else m]
                    R = W(z).view(z.shape[0], n, self.config.d_latent)
                lats.append(self.encoders[m][k](toks[m][0], toks[m][1], R))
            h = torch.cat(lats, dim=1)
            for layer in self.trunk:
                h = layer(h, blocks_mask)
            z = (h * weight).sum(1) / weight.sum(1).clamp_min(1.0)
        return h, blocks_mask

    def query_features(self, queries: torch.Tensor, horizon) -> torch.Tensor:
        b, q, _ = queries.shape
        tau = torch.as_tensor(horizon, dtype=queries.dtype, device=queries.device)
        if tau.ndim == 0:
            tau = tau.expand(b, q)
        elif tau.ndim == 1:
            tau = tau[:, None].expand(b, q)
        return torch.cat([self.gamma_x(queries), self.gamma_t(tau[..., None])], dim=-1)

    def forward(
        self,
        inputs: Mapping[str, SensorSet],
        queries: torch.Tensor,
        horizon=0.0,
        targets: Sequence[str] | None = None,
    ) -> dict[str, torch.Tensor]:
        targets = list(self.config.modalities if targets is None else targets)
        self._check(inputs, queries, targets)
        g, mask = self.encode(inputs)
        qf = self.query_features(queries, horizon)
        return {m: self.decoders[m](qf, g, mask) for m in targets}


def fleximodal_loss(
    pred: Mapping[str, torch.Tensor],
    target: Mapping[str, torch.Tensor],
    present: Mapping[str, torch.Tensor],
    weights: Mapping[str, float] | None = None,
) -> torch.Tensor:
    """Σ_m π_m · MSE(ŷ_m, y_m) over present targets only (π_m = 1/|M| by default).

    pred/target: {m: [B, Q]} (NaN targets ignored); present: {m: [B] bool}. A modality absent from every sample
    contributes nothing (its decoder gets no gradient).
    """
    names = list(pred)
    weights = weights or {m: 1.0 / len(names) for m in names}
    total = None
    for m in names:
        if m not in target:
            continue
        y = target[m]
        ok = present[m].bool()[:, None] & ~torch.isnan(y) if m in present else ~torch.isnan(y)
        if not bool(ok.any()):
            continue
        err = (pred[m] - torch.nan_to_num(y)) ** 2
        term = weights[m] * err[ok].mean()
        total = term if total is None else total + term
    if total is None:
        return torch.zeros((), requires_grad=True)
    return total
