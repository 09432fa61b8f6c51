"""CAVE's decision rule (spec Method §3) and its concept maps (§4), on plain tensors.

s_u = max_t (⟨h_t, f_u⟩/2 + 1/2), t*_u = argmax_t; logit_y = (1/T_tot)·Σ_{u∈Ω, cls(t*_u)=y} s_u.
Contribution c_t = (1/T_tot)·Σ_{u∈Ω: t*_u=t} s_u, so logit_y = Σ_{cls(t)=y} c_t exactly.
Feature-level map A_t(u) = s_u·[t*_u = t] (zero outside Ω), upsampled (nearest) to the image. Ω: every pixel, or
the object box (`box_region`, the official inference's ``mask_out_padded``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError


@dataclass
class CaveOutput:
    logits: torch.Tensor  # [B,Y]
    contributions: torch.Tensor  # [B,T]
    assignment: torch.Tensor  # [B,h,w] t*_u (−1 outside the region)
    scores: torch.Tensor  # [B,h,w] s_u (0 outside the region)
    classes: torch.Tensor | None = None  # [T] cls(t)


def cave_logits(
    features: torch.Tensor, bank, region: torch.Tensor | None = None, num_classes: int | None = None
):
    """The exact rule of §3. features [B,D,h,w] (unit pixel features), bank: a `ConceptBank`, region [B,h,w] bool
    (None: every pixel)."""
    if features.dim() != 4:
        raise UserError(f"features must be [B,D,h,w], got shape {tuple(features.shape)}")
    b, d, h, w = features.shape
    vectors, classes = bank.vectors.to(features), bank.classes.to(features.device)
    if vectors.shape[1] != d:
        raise UserError(f"feature dimension {d} != concept bank dimension {vectors.shape[1]}")
    if region is not None and region.shape != (b, h, w):
        raise UserError(f"region has shape {tuple(region.shape)}, expected {(b, h, w)}")
    n_classes = num_classes or int(classes.max()) + 1
    t_tot = len(vectors)
    sim = torch.einsum("td,bdhw->bthw", vectors, features) / 2 + 0.5
    scores, assign = sim.max(1)
    if region is not None:
        scores = scores * region
        assign = assign.masked_fill(~region, -1)
    onehot = F.one_hot(assign.clamp_min(0), t_tot).to(scores.dtype)
    if region is not None:
        onehot = onehot * region[..., None]
    contributions = torch.einsum("bhw,bhwt->bt", scores, onehot) / t_tot
    logits = torch.zeros(b, n_classes, dtype=scores.dtype, device=scores.device)
    logits.index_add_(1, classes, contributions)
    return CaveOutput(logits, contributions, assign, scores, classes)


def box_region(
    boxes: torch.Tensor, image_size: int | tuple[int, int], feature_size: tuple[int, int]
) -> torch.Tensor:
    """Ω = the object box on the feature grid, as the official inference does (``mask_out_padded: true``): box
    (y0, y1, x0, x1) in image pixels (ends exclusive) -> feature rows y0//s .. y1//s − 1 and columns likewise,
    s = the stride (image size / feature size); an empty range keeps one row (column). Returns [B,h,w] bool."""
    boxes = torch.as_tensor(boxes).long()
    if boxes.dim() != 2 or boxes.shape[1] != 4:
        raise UserError(f"boxes must be [B,4] (y0, y1, x0, x1), got shape {tuple(boxes.shape)}")
    ih, iw = (image_size, image_size) if isinstance(image_size, int) else image_size
    h, w = feature_size
    sy, sx = ih // h, iw // w
    y0, y1 = boxes[:, 0] // sy, boxes[:, 1] // sy
    x0, x1 = boxes[:, 2] // sx, boxes[:, 3] // sx
    y1, x1 = torch.where(y1 == y0, y0 + 1, y1), torch.where(x1 == x0, x0 + 1, x1)
    rows, cols = torch.arange(h), torch.arange(w)
    in_y = (rows[None] >= y0[:, None]) & (rows[None] < y1[:, None])
    in_x = (cols[None] >= x0[:, None]) & (cols[None] < x1[:, None])
    return in_y[:, :, None] & in_x[:, None, :]
