"""3D Consistency (spec Method §5) and part localisation (§6): method-agnostic scores of concept maps.

3D-C: for concept t and image n keep the top ``top_fraction`` attributed object pixels, accumulate their attribution
on the mesh vertex each shows (h_{t,n}(k) = Σ_{u: π_n(u)=k} A_{t,n}(u)), smooth on the mesh with a Gaussian in 3D
vertex distance (σ = ``sigma`` × object diameter) and normalise to sum 1. 3D-C(t) = mean over pairs (n, m) of images
where t is active of 1 − JS₂(h_{t,n}, h_{t,m}); 3D-C = the pair-weighted mean over concepts. Floor: the same score
of the maps permuted across the images (each map read through another image's pixel-to-vertex map).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError


@dataclass
class Consistency3D:
    score: float
    per_concept: torch.Tensor  # [T] (nan where a concept has < 2 active images)
    floor: float
    pairs: torch.Tensor  # [T] pairs per concept (the weights)
    floor_pairs: int = 0


def _check(attributions: torch.Tensor, pix_to_vertex: torch.Tensor, n_vertices: int) -> None:
    if attributions.dim() != 4:
        raise UserError(f"attributions must be [N,T,H,W], got shape {tuple(attributions.shape)}")
    n, _, h, w = attributions.shape
    if tuple(pix_to_vertex.shape) != (n, h, w):
        raise UserError(
            f"pix_to_vertex has shape {tuple(pix_to_vertex.shape)}, expected {(n, h, w)} (attributions' N,H,W)"
        )
    if pix_to_vertex.numel() and int(pix_to_vertex.max()) >= n_vertices:
        raise UserError(f"pix_to_vertex holds vertex id {int(pix_to_vertex.max())} >= V={n_vertices}")


def mesh_histograms(
    attributions: torch.Tensor, pix_to_vertex: torch.Tensor, vertices: torch.Tensor, top_fraction: float = 0.1
) -> torch.Tensor:
    """Raw vertex histograms h [N,T,V] of the top ``top_fraction`` attributed object pixels (attribution > 0)."""
    _check(attributions, pix_to_vertex, len(vertices))
    n, t, h, w = attributions.shape
    a = attributions.clamp_min(0).double().flatten(2)  # [N,T,HW]
    pv = pix_to_vertex.flatten(1)  # [N,HW]
    obj = pv >= 0
    a = a * obj[:, None]
    k = (top_fraction * obj.sum(1)).ceil().long().clamp_min(1)  # [N]
    order = a.sort(2, descending=True).values
    thresh = order.gather(2, (k - 1).clamp_max(h * w - 1)[:, None, None].expand(n, t, 1))
    keep = (a >= thresh) & (a > 0)
    hist = torch.zeros(n, t, len(vertices), dtype=torch.float64)
    idx = pv.clamp_min(0)[:, None, :].expand(n, t, h * w)
    return hist.scatter_add_(2, idx, a * keep)


def _smoother(vertices: torch.Tensor, sigma: float) -> tuple[torch.Tensor, float]:
    v = vertices.double()
    d = torch.cdist(v, v)
    s = sigma * float(d.max())
    return torch.exp(-(d**2) / (2 * s**2)), s


def _entropy_bits(p: torch.Tensor) -> torch.Tensor:
    return -torch.where(p > 0, p * torch.log2(p.clamp_min(1e-300)), 0).sum(-1)


def _js_bits(
    p: torch.Tensor, q: torch.Tensor, hp: torch.Tensor | None = None, hq: torch.Tensor | None = None
):
    """Jensen–Shannon divergence in bits, H((p+q)/2) − (H(p) + H(q))/2, in [0, 1]."""
    hp = _entropy_bits(p) if hp is None else hp
    hq = _entropy_bits(q) if hq is None else hq
    return (_entropy_bits((p + q) / 2) - (hp + hq) / 2).clamp(0, 1)


def _score(
    hist: torch.Tensor, vertices: torch.Tensor, sigma: float, measure: str, max_pairs: int | None, seed: int
):
    t = hist.shape[1]
    active = hist.sum(2) > 0  # [N,T]
    kernel, s = _smoother(vertices, sigma)
    if measure == "js":
        sm = hist @ kernel
        p = sm / sm.sum(2, keepdim=True).clamp_min(1e-300)
    elif measure == "iou":
        hit = (hist > 0).double()
        near = (torch.cdist(vertices.double(), vertices.double()) <= s).double()
        p = ((hit @ near) > 0).double()
    else:
        raise UserError(f"measure must be 'js' or 'iou', got {measure!r}")
    per, pairs = torch.full((t,), math.nan, dtype=torch.float64), torch.zeros(t, dtype=torch.long)
    for j in range(t):
        idx = active[:, j].nonzero()[:, 0]
        if len(idx) < 2:
            continue
        a, b = torch.triu_indices(len(idx), len(idx), 1)
        if max_pairs is not None and len(a) > max_pairs:  # a seeded sample of the pairs
            keep = torch.randperm(len(a), generator=torch.Generator().manual_seed(seed + j))[:max_pairs]
            a, b = a[keep], b[keep]
        pa, pb = p[idx[a], j], p[idx[b], j]
        if measure == "js":
            h = _entropy_bits(p[idx, j])
            sim = 1 - _js_bits(pa, pb, h[a], h[b])
        else:
            sim = (pa * pb).sum(1) / ((pa + pb) > 0).double().sum(1).clamp_min(1)
        per[j], pairs[j] = sim.mean(), len(idx) * (len(idx) - 1) // 2
    return per, pairs


def _weighted(per: torch.Tensor, pairs: torch.Tensor) -> float:
    ok = pairs > 0
    return float((per[ok] * pairs[ok]).sum() / pairs[ok].sum()) if ok.any() else math.nan


def consistency_3d(
    attributions: torch.Tensor,
    pix_to_vertex: torch.Tensor,
    vertices: torch.Tensor,
    *,
    top_fraction: float = 0.1,
    sigma: float = 0.1,
    measure: str = "js",
    max_pairs: int | None = 2000,
    seed: int = 0,
) -> Consistency3D:
    """3D-C of concept maps ``attributions`` [N,T,H,W] (≥ 0; images of one object class) given each image's
    ``pix_to_vertex`` [N,H,W] (−1 background/occluded) on the mesh ``vertices`` [V,3]. ``floor``: the score of the
    same maps read through a random derangement of the images' pixel-to-vertex maps (``seed``). ``max_pairs``:
    a concept with more active pairs is scored on a seeded random sample of that many (None: all pairs)."""
    attributions = torch.as_tensor(attributions)
    pix_to_vertex = torch.as_tensor(pix_to_vertex).long()
    vertices = torch.as_tensor(vertices)
    hist = mesh_histograms(attributions, pix_to_vertex, vertices, top_fraction)
    per, pairs = _score(hist, vertices, sigma, measure, max_pairs, seed)
    n = len(attributions)
    floor, floor_pairs = math.nan, 0
    if n >= 2:
        g = torch.Generator().manual_seed(seed)
        perm = torch.randperm(n, generator=g)
        while (perm == torch.arange(n)).any():  # a derangement: no map read through its own geometry
            perm = torch.randperm(n, generator=g)
        fh = mesh_histograms(attributions, pix_to_vertex[perm], vertices, top_fraction)
        fper, fpairs = _score(fh, vertices, sigma, measure, max_pairs, seed)
        floor, floor_pairs = _weighted(fper, fpairs), int(fpairs.sum())
    return Consistency3D(_weighted(per, pairs), per.float(), floor, pairs, floor_pairs)


THRESHOLDS = ("official", "strict")


def _top_maps(attributions: torch.Tensor, part_masks: torch.Tensor, percentile: float, threshold: str):
    """``(kept, top, full, part_masks)``: ``full`` the maps clamped ≥ 0 as float64 [N,T,HW]; ``top`` M_t [N,T,HW]
    bool; ``kept`` the map that gives w. ``threshold="official"`` (the official evaluation code): kept = A·[A ≥ p],
    M = {kept > 0}; ``"strict"`` (the spec's reading): M = {A > p} ∩ {A > 0}, kept = A (w from the full map).
    p = the ``percentile`` of each map (linear interpolation). One line for mismatched shapes."""
    if threshold not in THRESHOLDS:
        raise UserError(f"threshold must be 'official' or 'strict', got {threshold!r}")
    attributions = torch.as_tensor(attributions).double().clamp_min(0)
    part_masks = torch.as_tensor(part_masks).long()
    if attributions.dim() != 4 or tuple(part_masks.shape) != (attributions.shape[0], *attributions.shape[2:]):
        raise UserError(
            f"part_masks has shape {tuple(part_masks.shape)}, expected [N,H,W] of attributions "
            f"{tuple(attributions.shape)}"
        )
    full = attributions.flatten(2)
    p = torch.quantile(full, percentile / 100, dim=2, keepdim=True)
    if threshold == "official":
        kept = torch.where(full >= p, full, 0)
        return kept, kept > 0, full, part_masks
    return full, (full > p) & (full > 0), full, part_masks


def localisation(
    attributions: torch.Tensor, part_masks: torch.Tensor, percentile: float = 90, threshold: str = "official"
) -> torch.Tensor:
    """Per concept, the mean over the images where its map is non-zero of max over parts of
    loc(c, P) = (|P∩M| + |M|·w)/(|M| + |P|), P the part mask dilated 3×3, w = attribution mass inside P / total mass.
    ``threshold="official"`` (the official code): the map kept where A ≥ p_{percentile}(A), M = its pixels > 0, w
    on the kept map; ``"strict"`` (the spec's reading): M = {A > p} ∩ {A > 0}, w on the whole map.
    Returns [T] (nan for a concept never active)."""
    kept, top, full, part_masks = _top_maps(attributions, part_masks, percentile, threshold)
    n_parts = int(part_masks.max()) + 1 if part_masks.numel() else 0
    m = top.double()  # [N,T,HW]
    parts = F.one_hot(part_masks.clamp_min(0), max(n_parts, 1)).permute(0, 3, 1, 2).double()
    parts = parts * (part_masks >= 0)[:, None]
    present = parts.flatten(2).sum(2) > 0  # [N,J]
    dil = F.max_pool2d(parts, 3, stride=1, padding=1).flatten(2)  # [N,J,HW]
    inter = torch.einsum("ntx,njx->ntj", m, dil)
    size_m, size_p = m.sum(2)[..., None], dil.sum(2)[:, None, :]
    mass = torch.einsum("ntx,njx->ntj", kept, dil) / kept.sum(2, keepdim=True).clamp_min(1e-300)
    loc = (inter + size_m * mass) / (size_m + size_p).clamp_min(1e-300)
    loc = loc.masked_fill(~present[:, None, :], -1).max(2).values  # [N,T]
    active = (full.sum(2) > 0) & (m.sum(2) > 0)
    cnt = active.sum(0)
    out = (loc * active).sum(0) / cnt.clamp_min(1)
    return torch.where(cnt > 0, out, torch.full_like(out, math.nan)).float()


def global_coverage(
    attributions: torch.Tensor, part_masks: torch.Tensor, percentile: float = 90, threshold: str = "official"
) -> torch.Tensor:
    """Global coverage (§6): the official loc formula with the union of a class's concepts against the union of
    all parts, per image: (|P∩M| + |M|·w)/(|M| + |P|).

    - Each map clamped ≥ 0 and thresholded at its own percentile as in `localisation` (``threshold``); M = the OR
      of the concepts' M_t; w = mass of Σ_t kept_t inside P / its total mass (official: the kept maps, as the
      official code sums its thresholded, normalised maps; ``"strict"``: the whole clamped maps).
    - P = the 3×3 dilation of the union of all part labels ≥ 0 (the same set as the union of the dilated parts;
      labels < 0 are background).
    - Returns [N]: one value per image, nan where M is empty (no concept active) or the image has no part pixel;
      a class's global coverage is the nan-mean over its images (as `localisation` averages over active images).
    """
    kept, top, _, part_masks = _top_maps(attributions, part_masks, percentile, threshold)  # [N,T,HW]
    m = top.any(1).double()  # [N,HW]
    total = kept.sum(1)  # [N,HW]
    dil = F.max_pool2d((part_masks >= 0).double()[:, None], 3, stride=1, padding=1).flatten(1)  # [N,HW]
    size_m, size_p = m.sum(1), dil.sum(1)
    w = (total * dil).sum(1) / total.sum(1).clamp_min(1e-300)
    cov = ((m * dil).sum(1) + size_m * w) / (size_m + size_p).clamp_min(1e-300)
    ok = (size_m > 0) & ((part_masks >= 0).flatten(1).any(1))
    return torch.where(ok, cov, torch.full_like(cov, math.nan)).float()
