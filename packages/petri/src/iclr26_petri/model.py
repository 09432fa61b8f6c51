"""`PetriModel`: encoders -> Multimodal Set Transformer (early fusion) -> decoders, masked joint reconstruction.

A batch is G documents of S image cells and S expression cells. Per modality the encoder output
(G·S, L, D) is reshaped to (G, S·L, D); the two are concatenated to (G, 2·S·L, D) and pre-LN blocks attend over
all of it (full attention); the result is split back to (G·S, L, D) per modality. Losses are on masked content
only: MSE on masked image patches (z-scored pixels), NB NLL (or MSE) on masked genes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .config import PetriConfig
from .encoders import ExpressionEncoder, ImageEncoder, patchify, vit_stack
from .likelihood import nb_nll


def random_mask(n: int, n_tokens: int, ratio: float, generator: torch.Generator | None = None, device=None):
    """[n, n_tokens] bool with exactly round(ratio·n_tokens) True (masked) per row, uniformly at random."""
    n_mask = round(ratio * n_tokens)
    noise = torch.rand(n, n_tokens, generator=generator, device=device)
    ranks = noise.argsort(1).argsort(1)
    return ranks < n_mask


@dataclass
class DocumentBatch:
    """G documents: ``images`` [G, S, C, H, W] (raw pixels), ``counts`` [G, S, n_genes], ``library`` [G, S]
    (total counts; default ``counts.sum(-1)``), ``image_mask`` [G, S, N] and ``gene_mask`` [G, S, n_genes]
    (True = masked; drawn by `PetriModel` when None); ``paired`` [G, S] bool: slot j's image and expression cells
    are a known pair (the ``pair_key`` extension; used when ``config.pair_slots > 0``)."""

    images: torch.Tensor
    counts: torch.Tensor
    library: torch.Tensor | None = None
    image_mask: torch.Tensor | None = None
    gene_mask: torch.Tensor | None = None
    paired: torch.Tensor | None = None

    def with_masks(self, cfg: PetriConfig, generator: torch.Generator | None = None) -> DocumentBatch:
        g, s = self.images.shape[:2]
        im = self.image_mask
        gm = self.gene_mask
        if im is None:
            im = random_mask(g * s, cfg.n_patches, cfg.mask_ratio, generator).reshape(g, s, -1)
        if gm is None:
            gm = random_mask(g * s, cfg.n_genes, cfg.mask_ratio, generator).reshape(g, s, -1)
        lib = self.library if self.library is not None else self.counts.sum(-1)
        return DocumentBatch(
            self.images, self.counts, lib, im.to(self.images.device), gm.to(self.counts.device), self.paired
        )


@dataclass
class PetriOutput(ModelOutput):
    """``loss`` = w_img·loss_image + w_expr·loss_expression; ``image_pred`` [G, S, N, C·P·P] (z-scored pixels),
    ``expression_mu`` [G, S, n_genes] (NB mean, or the predicted log-normalised value with ``mse``)."""

    loss: torch.Tensor | None = None
    loss_image: torch.Tensor | None = None
    loss_expression: torch.Tensor | None = None
    image_pred: torch.Tensor | None = None
    expression_mu: torch.Tensor | None = None


def to_documents(x: torch.Tensor, n_docs: int) -> torch.Tensor:
    """(G·S, L, D) -> (G, S·L, D), rows of one document contiguous (S = 0 gives (G, 0, D))."""
    return x.reshape(n_docs, (x.shape[0] // n_docs) * x.shape[1], x.shape[-1])


def from_documents(x: torch.Tensor, n_latents: int) -> torch.Tensor:
    """(G, S·L, D) -> (G·S, L, D), the inverse of `to_documents`."""
    return x.reshape(x.shape[0] * x.shape[1] // n_latents, n_latents, x.shape[-1])


class PetriModel(PreTrainedModel):
    """PETRI (see the module docstring). ``save_pretrained``/``from_pretrained`` use safetensors."""

    config_class = PetriConfig
    base_model_prefix = "petri"
    main_input_name = "images"

    def __init__(self, config: PetriConfig) -> None:
        config.validate()
        super().__init__(config)
        d = config.hidden_size
        self.image_encoder = ImageEncoder(config)
        self.expression_encoder = ExpressionEncoder(config)
        self.modality = nn.Parameter(torch.zeros(2, d))
        self.slot = nn.Parameter(torch.zeros(config.pair_slots, d)) if config.pair_slots else None
        self.mst = vit_stack(config, config.mst_layers)
        self.mst_norm = nn.LayerNorm(d, eps=1e-6)
        # image decoder (MAE-like)
        self.dec_in = nn.Linear(d, d)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, d))
        self.dec_pos = nn.Parameter(torch.zeros(1, config.n_patches, d))
        self.decoder = vit_stack(config, config.dec_depth)
        self.dec_norm = nn.LayerNorm(d, eps=1e-6)
        self.dec_out = nn.Linear(d, config.n_channels * config.patch_size**2)
        # expression decoder: mean-pooled latents -> 3-layer MLP -> one value per gene
        self.expr_head = nn.Sequential(
            nn.Linear(d, d), nn.GELU(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, config.n_genes)
        )
        self.log_theta = nn.Parameter(torch.zeros(config.n_genes))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif hasattr(module, "_petri_init"):
            module._petri_init()
        if isinstance(module, PetriModel):
            nn.init.normal_(module.modality, std=0.02)
            if module.slot is not None:
                nn.init.normal_(module.slot, std=0.02)
            nn.init.normal_(module.mask_token, std=0.02)
            nn.init.normal_(module.dec_pos, std=0.02)
            nn.init.zeros_(module.log_theta)

    # ------------------------------------------------------------------ pieces
    def normalize_images(self, images: torch.Tensor) -> torch.Tensor:
        """z-score channels with the training statistics of the config."""
        mean = torch.tensor(self.config.image_mean, dtype=images.dtype, device=images.device).view(
            1, -1, 1, 1
        )
        std = torch.tensor(self.config.image_std, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
        return (images - mean) / std

    def expression_input(self, counts: torch.Tensor, library: torch.Tensor | None = None) -> torch.Tensor:
        """log1p(counts) with ``likelihood="nb"``; log1p(1e4·x/ℓ) (log-normalised) with ``"mse"``; the values
        unchanged when they are already log-normalised (``expression_input="lognorm"``)."""
        if self.config.expression_input == "lognorm":
            return counts
        if self.config.likelihood == "mse":
            lib = counts.sum(-1, keepdim=True) if library is None else library[..., None]
            return torch.log1p(1e4 * counts / lib.clamp_min(1.0))
        return torch.log1p(counts)

    def encode_image(self, images: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Pre-MST image latents [n, L, D] of raw ``images`` [n, C, H, W]."""
        return self.image_encoder(self.normalize_images(images), mask)

    def encode_expression(self, counts: torch.Tensor, mask: torch.Tensor | None = None, library=None):
        """Pre-MST expression latents [n, L, D] of ``counts`` [n, n_genes]."""
        return self.expression_encoder(self.expression_input(counts, library), mask)

    def fuse(
        self, z_img: torch.Tensor, z_expr: torch.Tensor, n_docs: int, paired: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The Multimodal Set Transformer: (G·S, L, D) per modality -> (G, 2·S·L, D) -> blocks -> split back.
        ``paired`` [G, S] (with ``pair_slots``): slot j's embedding is added to both cells of a paired slot."""
        if self.config.modality_embedding:
            z_img, z_expr = z_img + self.modality[0], z_expr + self.modality[1]
        if self.slot is not None and paired is not None:
            s = paired.shape[1]
            if s > len(self.slot):
                from iclr26_core.errors import UserError

                raise UserError(f"{s} cells per document but the model has {len(self.slot)} pair slots")
            tag = (paired[..., None].to(z_img.dtype) * self.slot[:s]).reshape(-1, 1, z_img.shape[-1])
            z_img, z_expr = z_img + tag, z_expr + tag
        a, b = to_documents(z_img, n_docs), to_documents(z_expr, n_docs)
        x = torch.cat([a, b], dim=1)
        if len(self.mst):
            for blk in self.mst:
                x = blk(x)
            x = self.mst_norm(x)
        lat = self.config.n_latents
        return from_documents(x[:, : a.shape[1]], lat), from_documents(x[:, a.shape[1] :], lat)

    def decode_image(self, lat: torch.Tensor) -> torch.Tensor:
        """[n, L, D] post-MST latents -> [n, N, C·P·P] predicted (z-scored) patches."""
        n = lat.shape[0]
        q = self.mask_token.expand(n, self.config.n_patches, -1) + self.dec_pos
        x = torch.cat([self.dec_in(lat), q], dim=1)
        for blk in self.decoder:
            x = blk(x)
        return self.dec_out(self.dec_norm(x[:, lat.shape[1] :]))

    def decode_expression(self, lat: torch.Tensor, library: torch.Tensor) -> torch.Tensor:
        """[n, L, D] -> NB mean μ = ℓ·softmax(logits) [n, n_genes] (or the log-normalised values with mse)."""
        out = self.expr_head(lat.mean(1))
        if self.config.likelihood == "mse":
            return out
        return library[:, None] * torch.softmax(out, dim=-1)

    # ------------------------------------------------------------------ forward
    def forward(self, batch: DocumentBatch, generator: torch.Generator | None = None) -> PetriOutput:
        cfg = self.config
        batch = batch.with_masks(cfg, generator)
        g, s = batch.images.shape[:2]
        images = batch.images.reshape(g * s, *batch.images.shape[2:])
        counts = batch.counts.reshape(g * s, -1)
        lib = batch.library.reshape(g * s).to(counts.dtype)
        im_mask, gene_mask = batch.image_mask.reshape(g * s, -1), batch.gene_mask.reshape(g * s, -1)
        z_img = self.encode_image(images, im_mask)
        z_expr = self.encode_expression(counts, gene_mask, lib)
        h_img, h_expr = self.fuse(z_img, z_expr, g, batch.paired)
        pred = self.decode_image(h_img)
        target = patchify(self.normalize_images(images), cfg.patch_size)
        per_patch = ((pred - target) ** 2).mean(-1)
        loss_img = (per_patch * im_mask).sum() / im_mask.sum().clamp_min(1)
        mu = self.decode_expression(h_expr, lib)
        if cfg.likelihood == "mse":
            per_gene = (mu - self.expression_input(counts, lib)) ** 2
        else:
            per_gene = nb_nll(counts, mu, torch.exp(self.log_theta))
        loss_expr = (per_gene * gene_mask).sum() / gene_mask.sum().clamp_min(1)
        loss = cfg.w_image * loss_img + cfg.w_expression * loss_expr
        return PetriOutput(
            loss=loss,
            loss_image=loss_img,
            loss_expression=loss_expr,
            image_pred=pred.reshape(g, s, *pred.shape[1:]),
            expression_mu=mu.reshape(g, s, -1),
        )
