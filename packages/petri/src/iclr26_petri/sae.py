"""A BatchTopK sparse autoencoder (Bussmann et al.) on cell embeddings, and the count of multimodal latents.

z = ReLU(W_enc(x − b_dec) + b_enc); in training the top k·B activations of the whole batch survive; x̂ =
W_dec z + b_dec, MSE loss; decoder columns renormalised to unit norm after each step. At inference a global
threshold θ (running mean of the smallest kept activation) keeps z > θ, so codes do not depend on the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class BatchTopKSAE(nn.Module):
    def __init__(self, d_in: int, n_latents: int, k: int) -> None:
        super().__init__()
        self.k = k
        self.W_enc = nn.Parameter(torch.empty(n_latents, d_in))
        nn.init.kaiming_uniform_(self.W_enc)
        self.W_dec = nn.Parameter(self.W_enc.detach().T.clone())
        self.b_enc = nn.Parameter(torch.zeros(n_latents))
        self.b_dec = nn.Parameter(torch.zeros(d_in))
        self.register_buffer("threshold", torch.tensor(0.0))
        self.register_buffer("n_updates", torch.tensor(0))
        self.normalize_decoder()

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        self.W_dec /= self.W_dec.norm(dim=0, keepdim=True).clamp_min(1e-12)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu((x - self.b_dec) @ self.W_enc.T + self.b_enc)

    def encode(self, x: torch.Tensor, batch_topk: bool | None = None) -> torch.Tensor:
        """Codes [B, n_latents]: the batch top-k·B in training mode (or ``batch_topk=True``), else z > θ."""
        pre = self.pre_activations(x)
        use_topk = self.training if batch_topk is None else batch_topk
        if not use_topk:
            return pre * (pre > self.threshold)
        flat = pre.flatten()
        kb = min(self.k * x.shape[0], flat.numel())
        vals, idx = flat.topk(kb)
        z = torch.zeros_like(flat).scatter(0, idx, vals).view_as(pre)
        if self.training:
            with torch.no_grad():
                kept = vals[vals > 0]
                if len(kept):
                    self.n_updates += 1
                    self.threshold += (kept.min() - self.threshold) / self.n_updates
        return z

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encode(x)
        return z @ self.W_dec.T + self.b_dec, z


@dataclass
class SAEResult:
    """The trained SAE, ``multimodal`` [n_latents] bool, and each latent's firing frequency per modality."""

    sae: BatchTopKSAE
    multimodal: torch.Tensor
    freq_image: torch.Tensor
    freq_expression: torch.Tensor

    @property
    def count(self) -> int:
        return int(self.multimodal.sum())


def band_rule(freq_image: torch.Tensor, freq_expression: torch.Tensor, band=(0.1, 0.9)) -> torch.Tensor:
    """Multimodal = active in a fraction within [lo, hi] of image cells AND of expression cells."""
    lo, hi = band
    return (freq_image >= lo) & (freq_image <= hi) & (freq_expression >= lo) & (freq_expression <= hi)


def scale_unit_msn(x: torch.Tensor) -> torch.Tensor:
    """Scale (not centre) so that the mean squared norm of the rows is 1."""
    return x / x.pow(2).sum(-1).mean().sqrt().clamp_min(1e-12)


def aux_k_loss(
    sae: BatchTopKSAE, x: torch.Tensor, x_hat: torch.Tensor, dead: torch.Tensor, aux_k: int
) -> torch.Tensor:
    """The auxiliary-k loss for dead latents (Gao et al. 2024; the BatchTopK reference code): the top ``aux_k``
    pre-activations of the ``dead`` latents of each sample reconstruct the residual x − x̂ (detached) through
    their decoder columns; squared error summed over features, mean over samples. 0 when no latent is dead."""
    n_dead = int(dead.sum())
    if n_dead == 0 or aux_k <= 0:
        return x.new_zeros(())
    pre = sae.pre_activations(x)[:, dead]
    vals, idx = pre.topk(min(aux_k, n_dead), dim=-1)
    z = torch.zeros_like(pre).scatter(-1, idx, vals)
    residual = (x - x_hat).detach()
    return (z @ sae.W_dec[:, dead].T - residual).pow(2).sum(-1).mean()


def train_sae(
    x: torch.Tensor,
    n_latents: int,
    k: int,
    steps: int,
    batch_size: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    aux_k: int = 0,
    aux_coef: float = 1 / 32,
    dead_after: int = 5,
) -> BatchTopKSAE:
    """Adam on the MSE (summed over features); ``aux_k > 0`` adds ``aux_coef`` x `aux_k_loss` for the latents that
    have not fired for ``dead_after`` steps (an option against dead latents; off by default)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    sae = BatchTopKSAE(x.shape[1], n_latents, k)
    with torch.no_grad():
        sae.b_dec.copy_(x.median(0).values)
    opt = torch.optim.Adam(sae.parameters(), lr=lr)
    idle = torch.zeros(n_latents, dtype=torch.long)  # steps since each latent last fired
    sae.train()
    for _ in range(steps):
        xb = x[torch.randint(len(x), (min(batch_size, len(x)),), generator=gen)]
        x_hat, z = sae(xb)
        loss = (x_hat - xb).pow(2).sum(-1).mean()
        if aux_k > 0:
            fired = (z > 0).any(0)
            idle = torch.where(fired, torch.zeros_like(idle), idle + 1)
            loss = loss + aux_coef * aux_k_loss(sae, xb, x_hat, idle >= dead_after, aux_k)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sae.normalize_decoder()
    return sae.eval()


def multimodal_dims(
    x_image: torch.Tensor,
    x_expression: torch.Tensor,
    *,
    n_latents: int = 512,
    k: int = 16,
    steps: int = 1000,
    band: tuple[float, float] = (0.1, 0.9),
    seed: int = 0,
    aux_k: int = 0,
) -> SAEResult:
    """Train a BatchTopK SAE on the pooled embeddings (each modality scaled to unit mean squared norm) and count
    latents active in 10–90% of image cells and 10–90% of expression cells (threshold-mode codes). ``aux_k > 0``
    trains with the auxiliary-k loss for dead latents (`train_sae`)."""
    xi = scale_unit_msn(torch.as_tensor(x_image, dtype=torch.float32))
    xe = scale_unit_msn(torch.as_tensor(x_expression, dtype=torch.float32))
    sae = train_sae(torch.cat([xi, xe]), n_latents, k, steps, seed=seed, aux_k=aux_k)
    with torch.no_grad():
        fi = (sae.encode(xi) > 0).float().mean(0)
        fe = (sae.encode(xe) > 0).float().mean(0)
    return SAEResult(sae, band_rule(fi, fe, band), fi, fe)
