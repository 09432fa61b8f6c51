"""Group Relative Query Alignment (GRQA): a GRPO-style, training-only loss for query-based segmenters.

For each image and each ground-truth segment g (binary mask Y_g at the mask-logit resolution, class c_g):

1. group G_g: the G queries with the lowest matching cost 2·(−p_k[c_g]) + 5·BCE(M_k, Y_g) + 5·Dice(M_k, Y_g)
   (the Hungarian matcher's cost of Mask2Former/EoMT), or all K queries;
2. reward (no gradient): r_{k,g} = Dice(σ(M_k), Y_g) + softmax(c_k)[c_g]  (or Dice, or soft IoU);
3. advantage: A_{k,g} = (r_{k,g} − mean_{G_g} r) / (std_{G_g} r + ε)  (std with Bessel's correction, as trl's
   GRPO; ``scale_std=False``: r − mean);
4. policy: f̄_g = mean of E(u) over u ∈ Y_g; s_{k,g} = cos(m_k, f̄_g)/T; π_g = softmax_{k ∈ G_g} s_{k,g};
5. L_GRQA = −(1/|𝒢|) Σ_g Σ_{k∈G_g} A_{k,g} log π_g(k)  (``objective="sum"``, the spec's reading); ``"mean"``
   divides each group's sum by G (GRPO's group average), ``"expected"`` uses −Σ_k π_g(k)·A_{k,g} (see `GRQAConfig`).

Shapes: mask_embeds [B, K, D], pixel_embeds [B, D, h', w'], mask_logits [B, K, h, w], class_logits [B, K, C+1],
mask_labels: B tensors [n_b, H, W] (0/1), class_labels: B tensors [n_b].
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .config import GRQAConfig

COST_CLASS, COST_MASK, COST_DICE = 2.0, 5.0, 5.0  # Mask2Former / EoMT matcher weights


@dataclass
class GRQAOutput:
    """``loss`` (scalar), and per image: ``rewards`` [K, n_b], ``advantages`` [G, n_b], ``groups`` [G, n_b]
    (query indices of each segment's group)."""

    loss: Tensor
    rewards: list[Tensor] = field(default_factory=list)
    advantages: list[Tensor] = field(default_factory=list)
    groups: list[Tensor] = field(default_factory=list)


def resize_masks(masks: Tensor, size: tuple[int, int]) -> Tensor:
    """[n, H, W] 0/1 masks -> [n, h, w] 0/1 floats: area average ≥ 0.5, or > 0 for a segment that would vanish."""
    if masks.numel() == 0:
        return masks.new_zeros((masks.shape[0], *size), dtype=torch.float32)
    frac = F.interpolate(masks[:, None].float(), size=size, mode="area")[:, 0]
    hard = (frac >= 0.5).float()
    empty = hard.flatten(1).sum(1) == 0
    hard[empty] = (frac[empty] > 0).float()
    return hard


def matching_cost(mask_logits: Tensor, class_logits: Tensor, masks: Tensor, classes: Tensor) -> Tensor:
    """[K, n] matcher cost of one image: mask_logits [K, P], class_logits [K, C+1], masks [n, P] (0/1)."""
    probs = class_logits.softmax(-1)
    cost_class = -probs[:, classes]
    pixels = mask_logits.shape[1]
    bce = (F.softplus(mask_logits).sum(1, keepdim=True) - mask_logits @ masks.T) / pixels
    sig = mask_logits.sigmoid()
    dice = 1 - (2 * sig @ masks.T + 1) / (sig.sum(1, keepdim=True) + masks.sum(1)[None] + 1)
    return COST_CLASS * cost_class + COST_MASK * bce + COST_DICE * dice


def rewards(mask_logits: Tensor, class_logits: Tensor, masks: Tensor, classes: Tensor, kind: str) -> Tensor:
    """[K, n] rewards r_{k,g} of one image (shapes as `matching_cost`); no gradient."""
    with torch.no_grad():
        sig = mask_logits.sigmoid()
        inter = sig @ masks.T
        sums = sig.sum(1, keepdim=True) + masks.sum(1)[None]
        if kind == "iou":
            return inter / (sums - inter).clamp_min(1e-6)
        dice = 2 * inter / sums.clamp_min(1e-6)
        if kind == "dice":
            return dice
        return dice + class_logits.softmax(-1)[:, classes]


def group_advantages(r: Tensor, scale_std: bool = True, eps: float = 1e-6) -> Tensor:
    """Group-relative advantages along dim 0 ([G, n] rewards -> [G, n]): centred, optionally std-scaled."""
    centred = r - r.mean(0, keepdim=True)
    if not scale_std:
        return centred
    return centred / (r.std(0, keepdim=True, unbiased=True) + eps)


def select_groups(cost: Tensor, size: int, group: str) -> Tensor:
    """[G, n] query indices per segment: the ``size`` lowest-cost queries (``topk``) or all queries (``all``)."""
    k = cost.shape[0]
    if group == "all":
        return torch.arange(k, device=cost.device)[:, None].expand(k, cost.shape[1])
    return cost.topk(min(size, k), dim=0, largest=False).indices


def _group_size(cfg: GRQAConfig, k: int) -> int:
    if cfg.group == "topk" and cfg.group_size > k:
        warnings.warn(
            f"grqa.group_size={cfg.group_size} > {k} queries: clamped to {k}", UserWarning, stacklevel=3
        )
        return k
    return cfg.group_size


def group_objective(scores: Tensor, adv: Tensor, objective: str) -> Tensor:
    """[G, n] per-member loss terms from the group scores s = cos/T and advantages A (both [G, n], Σ_G A = 0):
    ``sum`` −A·log softmax(s); ``mean`` −A·s/G (equal to −A·log softmax(s)/G summed over the group, since
    Σ A = 0 cancels the normaliser; computed without it, so exact); ``expected`` −softmax(s)·A."""
    if objective == "expected":
        return -(torch.softmax(scores, dim=0) * adv)
    if objective == "mean":
        return -(adv * scores) / scores.shape[0]
    return -(adv * torch.log_softmax(scores, dim=0))


def grqa_loss(
    mask_embeds: Tensor,
    pixel_embeds: Tensor,
    mask_logits: Tensor,
    class_logits: Tensor,
    mask_labels: list[Tensor],
    class_labels: list[Tensor],
    cfg: GRQAConfig | None = None,
) -> GRQAOutput:
    """L_GRQA of a batch (module docstring). Gradients reach ``mask_embeds`` and ``pixel_embeds`` only."""
    cfg = cfg or GRQAConfig()
    b, k, _ = mask_embeds.shape
    size = _group_size(cfg, k)
    logit_hw, embed_hw = tuple(mask_logits.shape[-2:]), tuple(pixel_embeds.shape[-2:])
    total = mask_embeds.sum() * 0.0 + pixel_embeds.sum() * 0.0  # keeps the graph when no segment is left
    out = GRQAOutput(loss=total)
    n_groups = 0
    for i in range(b):
        masks = resize_masks(mask_labels[i], logit_hw).flatten(1).to(mask_logits.dtype)
        classes = class_labels[i].long()
        logits_i = mask_logits[i].detach().flatten(1)
        cls_i = class_logits[i].detach()
        r = rewards(logits_i, cls_i, masks, classes, cfg.reward)
        groups = select_groups(matching_cost(logits_i, cls_i, masks, classes), size, cfg.group)
        adv = group_advantages(r.gather(0, groups), cfg.scale_std, cfg.eps)
        emb_masks = masks if embed_hw == logit_hw else resize_masks(mask_labels[i], embed_hw).flatten(1)
        emb_masks = emb_masks.to(pixel_embeds.dtype)
        feats = pixel_embeds[i].flatten(1)  # [D, P']
        f_bar = (emb_masks @ feats.T) / emb_masks.sum(1, keepdim=True).clamp_min(1.0)  # [n, D]
        cos = F.normalize(mask_embeds[i], dim=-1) @ F.normalize(f_bar, dim=-1).T  # [K, n]
        keep = emb_masks.sum(1) > 0
        total = (
            total
            + group_objective(cos.gather(0, groups) / cfg.temperature, adv, cfg.objective)[:, keep].sum()
        )
        n_groups += int(keep.sum())
        out.rewards.append(r)
        out.advantages.append(adv)
        out.groups.append(groups)
    out.loss = total / max(n_groups, 1)
    return out


def labels_to_targets(labels: Tensor, ignore_index: int = 255) -> tuple[list[Tensor], list[Tensor]]:
    """Semantic label maps [B, H, W] -> per image (masks [n_b, H, W] float 0/1, classes [n_b]): one segment per
    class present (``ignore_index`` pixels belong to no segment)."""
    mask_labels, class_labels = [], []
    for lab in labels:
        classes = torch.unique(lab)
        classes = classes[classes != ignore_index]
        mask_labels.append((lab[None] == classes[:, None, None]).float())
        class_labels.append(classes.long())
    return mask_labels, class_labels


def describe(cfg: GRQAConfig) -> dict[str, Any]:
    """The GRQA settings as a plain dict (for logs and metrics)."""
    from dataclasses import asdict

    return asdict(cfg)
