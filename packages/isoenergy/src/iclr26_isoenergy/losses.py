"""The objective of SAE-A (Eq. 1): L = L_SAE + β·L_align.

* ``reconstruction_loss(x, x̂)`` = mean over rows of ‖x − x̂‖² (per-row sum of squares; the L1 weight is 0
  for MP).
* ``alignment_loss(z_I, z_T)`` = −(1/b)·Σ_i cos(z_I,i, z_T,i) over the b matched pairs of a batch, after
  top-1 masking: for each pair, the position of the largest image code and of the largest text code is zeroed
  in both codes, so that dominant atoms are not forced to align (official detail).
* ``iso_energy_loss(z_I, z_T)`` = mean_k |E_I,k − E_T,k| / (E_I,k + E_T,k + 1e-5), E = batch mean of z²
  (the official code's explicit Iso-Energy loss; ``align="energy"``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reconstruction_loss(x: torch.Tensor, x_hat: torch.Tensor) -> torch.Tensor:
    """mean_rows ‖x − x̂‖². x, x̂: [N, D] -> scalar."""
    return ((x - x_hat) ** 2).sum(dim=1).mean()


def top1_mask(z_img: torch.Tensor, z_txt: torch.Tensor) -> torch.Tensor:
    """[b, K] mask with 0 at argmax(z_I,i) and argmax(z_T,i) of each pair i, 1 elsewhere."""
    mask = torch.ones_like(z_img)
    rows = torch.arange(z_img.shape[0], device=z_img.device)
    mask[rows, z_img.argmax(dim=1)] = 0.0
    mask[rows, z_txt.argmax(dim=1)] = 0.0
    return mask


def alignment_loss(z_img: torch.Tensor, z_txt: torch.Tensor, mask_top1: bool = True) -> torch.Tensor:
    """−mean_i cos(z_I,i, z_T,i) over matched pairs (rows), top-1 masked by default. [b, K] x2 -> scalar."""
    if z_img.shape != z_txt.shape:
        raise ValueError(
            f"paired codes must have equal shapes, got {tuple(z_img.shape)} {tuple(z_txt.shape)}"
        )
    if mask_top1:
        mask = top1_mask(z_img.detach(), z_txt.detach())
        z_img, z_txt = z_img * mask, z_txt * mask
    return -F.cosine_similarity(z_img, z_txt, dim=1, eps=1e-8).mean()


def iso_energy_loss(z_img: torch.Tensor, z_txt: torch.Tensor) -> torch.Tensor:
    """mean_k |E_I,k − E_T,k| / (E_I,k + E_T,k + 1e-5) with E = mean over the batch of z². -> scalar."""
    e_img = (z_img**2).mean(dim=0)
    e_txt = (z_txt**2).mean(dim=0)
    return ((e_img - e_txt).abs() / (e_img + e_txt + 1e-5)).mean()
