"""Concept maps: where each concept contributed, per pixel (feature-level) or by LRP through Φ (pixel-level).

Above both `decision` (the rule that gives a `CaveOutput`) and `lrp` (zennit's relevance, which itself calls
`decision.cave_logits`), so neither imports the other's user.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError

from .decision import CaveOutput


def concept_maps(
    output: CaveOutput,
    image_size: tuple[int, int],
    method: str = "feature",
    model=None,
    images: torch.Tensor | None = None,
) -> torch.Tensor:
    """A [B,T,H,W]: feature-level maps A_t(u) = s_u·[t*_u = t] upsampled (nearest) to ``image_size``;
    ``method="lrp"``: the paper's pixel-level maps, input relevance of each contribution c_t through Φ by zennit's
    LRP (`iclr26_cave.lrp`; needs ``model`` and the ``images`` that gave ``output``; pip install iclr26-cave[peers])."""
    if method == "lrp":
        if model is None or images is None:
            raise UserError("method='lrp' needs the model and images that gave this output")
        from .lrp import lrp_concept_maps

        maps = lrp_concept_maps(model, images)
        if tuple(maps.shape[-2:]) != tuple(image_size):
            maps = F.interpolate(maps, size=tuple(image_size), mode="bilinear", align_corners=False)
        return maps
    if method != "feature":
        raise UserError(f"method must be 'feature' or 'lrp', got {method!r}")
    t_tot = output.contributions.shape[1]
    onehot = F.one_hot(output.assignment.clamp_min(0), t_tot).permute(0, 3, 1, 2).to(output.scores.dtype)
    maps = onehot * (output.scores * (output.assignment >= 0))[:, None]
    return F.interpolate(maps, size=tuple(image_size), mode="nearest")
