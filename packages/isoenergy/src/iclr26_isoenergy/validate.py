"""Input checks shared by the library and the CLI: a user's mistake is one `IsoEnergyError` line.

`check_pairs(img, txt)` is the gate every entry point uses: two [N, D] float tensors with the same number of
rows (instance-level pairs: row i of ``img`` is the image of caption i of ``txt``), the same D, finite values.
"""

from __future__ import annotations

from typing import Any

from iclr26_core.errors import UserError


class IsoEnergyError(UserError):
    """Bad input to iclr26-isoenergy (shapes, NaN, β < 0, k > n_atoms, ...): one line, exit status 2."""


def check_embeddings(x: Any, name: str = "embeddings"):
    """``x`` as a float32 [N, D] tensor, or `IsoEnergyError` (not a tensor, wrong rank, empty, NaN/inf)."""
    import torch

    if not isinstance(x, torch.Tensor):
        raise IsoEnergyError(f"{name} must be a torch tensor of shape [N, D], got {type(x).__name__}")
    if x.ndim != 2:
        raise IsoEnergyError(f"{name} must have shape [N, D], got {tuple(x.shape)}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise IsoEnergyError(f"{name} is empty (shape {tuple(x.shape)})")
    if not x.is_floating_point():
        x = x.float()
    if not bool(torch.isfinite(x).all()):
        raise IsoEnergyError(f"{name} contain NaN or infinite values")
    return x.float()


def check_pairs(img: Any, txt: Any):
    """(img, txt) as float32 [N, D] tensors of matched pairs, or `IsoEnergyError`."""
    img = check_embeddings(img, "image embeddings")
    txt = check_embeddings(txt, "text embeddings")
    if img.shape[0] != txt.shape[0]:
        raise IsoEnergyError(
            f"pairs required: {img.shape[0]} image rows but {txt.shape[0]} text rows "
            "(row i of each must be the same image-caption pair)"
        )
    if img.shape[1] != txt.shape[1]:
        raise IsoEnergyError(
            f"image and text embeddings have different dimensions ({img.shape[1]} vs {txt.shape[1]}); "
            "both must come from the same dual encoder's shared space"
        )
    return img, txt


def check_beta(beta: float) -> float:
    beta = float(beta)
    if not beta >= 0:  # catches NaN too
        raise IsoEnergyError(f"beta must be >= 0 (0 is the plain SAE), got {beta}")
    return beta
