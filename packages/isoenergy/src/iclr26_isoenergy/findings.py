"""The paper's remaining findings on a user's embeddings: modality probes (p_acc), the bridge matrix and ρ,
and the bimodal-subspace vector-arithmetic edit (finding iv) with its retrieval score.

Definitions follow the official code (``Parabrele/IsoEnergy``, ``src/utils.py``: ``data_classifiability``,
``measure_bridge``, ``get_rho`` and the FashionIQ cells of ``demo.ipynb``); read for understanding, none copied.

Modality probes (official ``data_classifiability``, probes 1–3). With atom energies E_k = E_I,k + E_T,k and the
energy-weighted mean atom m_G = Σ_{k∈G} E_k·d_k / Σ_{k∈G} E_k of each group G ∈ {image, text, bimodal} and of all
atoms (m), a row x is called "image" by probe G when (x − m)·m_G > 0. acc_image is that probe's accuracy at
telling image rows from text rows (target 1), acc_text the text probe's at finding text rows (target 1), and
acc_bimodal = max(a, 1 − a) for the bimodal probe (target 0.5: bimodal atoms are orthogonal to the gap).
p_acc summarises the three as the mean of acc_image, acc_text and 1.5 − acc_bimodal (each 1 at its target);
the paper's exact aggregation is not public (inferred).

Bridge matrix (official ``measure_bridge``, weight "cov"). C = normalised cross-covariance of the centred image
and text codes of matched pairs, C_jk = mean_i z̃_I,ij·z̃_T,ik / sqrt(var_I,j·var_T,k) (dead atoms 0), keeping
only entries ≥ its ``bridge_quantile`` quantile; G = D·Dᵀ keeping entries with |G| ≥ its ``gram_quantile``
quantile; B = C ⊙ G. Two official slips are not copied: it centred the codes by the energy vector (mean z²)
instead of the mean code, and its normalisation was written on an advanced-indexing copy, so it never applied.

ρ (official ``get_rho``): with block masses M(A, B) = Σ_{j∈A, k∈B} |B_jk| over the groups I, T, B (bimodal),
α = Σ of the blocks that touch B, 1 − α = M(I,I) + M(I,T) + M(T,I) + M(T,T), and e = the bimodal energy
fraction, ρ = (α / e)·((1 − e) / (1 − α)): the odds that bridge mass sits on bimodal atoms relative to their
energy share (ρ > 1: the cross-modal pairing lives on bimodal atoms more than their energy would predict).

Vector arithmetic (finding iv, the FashionIQ cells): a query is the reconstructed source image plus a
text-derived edit. Baseline: q = x̂_src + x̂_txt (all atoms); bimodal edit: q = x̂_src + x̂_txt|bimodal (the
edit's unimodal atoms, its modality bias, removed). The score is the official retrieval score: the mean of
recall@10 and recall@50 of the targets x̂_tgt within random batches of 256 (both directions, as its
``recall``), and the out-of-distribution score of each query: its cosine distance to its 5th nearest target.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .energy import BIMODAL, DEAD, IMAGE, TEXT, EnergyReport, encode_batched, restrict
from .validate import IsoEnergyError, check_embeddings, check_pairs


def _energy(report: EnergyReport) -> torch.Tensor:
    return (report.e_img + report.e_txt).double()


def _weighted_mean(atoms: torch.Tensor, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    w = e * mask.double()
    return None if float(w.sum()) <= 0 else (w[:, None] * atoms).sum(0) / w.sum()


def modality_probes(sae, img: torch.Tensor, txt: torch.Tensor, report: EnergyReport) -> dict[str, float]:
    """acc_image, acc_text, acc_bimodal and p_acc (module docstring); NaN for a probe whose group is empty."""
    img, txt = check_pairs(img, txt)
    atoms = sae.atoms().detach().double()
    e = _energy(report)
    m_all = _weighted_mean(atoms, e, report.labels != DEAD)
    if m_all is None:
        raise IsoEnergyError("every atom is dead: no probe can be built")
    x = torch.cat([img, txt]).double() - m_all
    is_img = torch.arange(x.shape[0]) < img.shape[0]
    out: dict[str, float] = {}
    for name, label, target in (
        ("image", IMAGE, is_img),
        ("text", TEXT, ~is_img),
        ("bimodal", BIMODAL, is_img),
    ):
        m = _weighted_mean(atoms, e, report.labels == label)
        if m is None:
            out[f"acc_{name}"] = float("nan")
            continue
        acc = float(((x @ m > 0) == target).double().mean())
        out[f"acc_{name}"] = max(acc, 1 - acc) if name == "bimodal" else acc
    out["p_acc"] = (out["acc_image"] + out["acc_text"] + 1.5 - out["acc_bimodal"]) / 3
    return out


def _keep_top(m: torch.Tensor, quantile: float, absolute: bool) -> torch.Tensor:
    v = m.abs() if absolute else m
    k = max(1, int(quantile * m.numel()))
    threshold = v.flatten().kthvalue(k).values
    return torch.where(v >= threshold, m, torch.zeros_like(m))


def bridge_matrix(
    sae,
    img: torch.Tensor,
    txt: torch.Tensor,
    *,
    bridge_quantile: float = 0.999,
    gram_quantile: float = 0.9,
) -> torch.Tensor:
    """B = C ⊙ G, [K, K] (module docstring); rows are image-side atoms, columns text-side atoms."""
    img, txt = check_pairs(img, txt)
    for name, q in (("bridge_quantile", bridge_quantile), ("gram_quantile", gram_quantile)):
        if not 0.0 <= q < 1.0:
            raise IsoEnergyError(f"{name} must be in [0, 1), got {q}")
    zi, zt = encode_batched(sae, img).double(), encode_batched(sae, txt).double()
    zi, zt = zi - zi.mean(0), zt - zt.mean(0)
    c = zi.T @ zt / zi.shape[0]
    si, st = zi.pow(2).mean(0).sqrt(), zt.pow(2).mean(0).sqrt()
    denom = si[:, None] * st[None, :]
    c = torch.where(denom > 0, c / denom.clamp_min(1e-300), torch.zeros_like(c))
    atoms = sae.atoms().detach().double()
    gram = _keep_top(atoms @ atoms.T, gram_quantile, absolute=True)
    return _keep_top(c, bridge_quantile, absolute=False) * gram


def bridge_rho(bridge: torch.Tensor, report: EnergyReport) -> dict[str, float]:
    """Block masses of |B| over the groups I, T, B, the bimodal share α, the energy share e and ρ."""
    k = report.labels.shape[0]
    if tuple(bridge.shape) != (k, k):
        raise IsoEnergyError(f"the bridge must be [{k}, {k}] for this report, got {tuple(bridge.shape)}")
    groups = {"I": report.labels == IMAGE, "T": report.labels == TEXT, "B": report.labels == BIMODAL}
    b = bridge.abs().double()
    mass = {f"{g}{h}": float(b[mg][:, mh].sum()) for g, mg in groups.items() for h, mh in groups.items()}
    alpha_mass = sum(v for key, v in mass.items() if "B" in key)
    rest = mass["II"] + mass["IT"] + mass["TI"] + mass["TT"]
    e = report.fractions["bimodal"]
    total = alpha_mass + rest
    alpha = alpha_mass / total if total > 0 else float("nan")
    if rest == 0 or e == 0:
        rho = float("inf") if alpha_mass > 0 and e > 0 else float("nan")
    else:
        rho = (alpha_mass / e) * ((1 - e) / rest)
    return {"mass": mass, "alpha": alpha, "e_bimodal": e, "rho": rho}


def vector_edit(
    sae, report: EnergyReport, source: torch.Tensor, edit: torch.Tensor, keep: str = "bimodal"
) -> torch.Tensor:
    """Queries x̂_src + x̂_edit restricted to ``keep`` atoms ("all" is the baseline), unit-normalised rows."""
    source, edit = check_embeddings(source, "source"), check_embeddings(edit, "edit")
    if source.shape != edit.shape:
        raise IsoEnergyError(f"source and edit must have the same shape, got {tuple(source.shape)} and "
                             f"{tuple(edit.shape)}")  # fmt: skip
    q = restrict(sae, source, report, "all") + restrict(sae, edit, report, keep)
    return F.normalize(q, dim=1)


def recall_at_k(
    queries: torch.Tensor, targets: torch.Tensor, k: int, batch: int = 256, seed: int = 0
) -> float:
    """Mean of query→target and target→query recall@k within random batches (official ``recall``)."""
    queries, targets = check_pairs(queries, targets)
    n = queries.shape[0]
    if n < batch:
        raise IsoEnergyError(f"{n} rows are fewer than one retrieval batch of {batch}")
    if not 1 <= k <= batch:
        raise IsoEnergyError(f"k must be in [1, {batch}], got {k}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    a, b = F.normalize(queries.double(), dim=1), F.normalize(targets.double(), dim=1)
    label = torch.arange(batch)[:, None]
    hits, total = 0.0, 0
    for start in range(0, n - batch + 1, batch):
        idx = perm[start : start + batch]
        sim = a[idx] @ b[idx].T
        hits += float((sim.topk(k, dim=1).indices == label).any(1).sum())
        hits += float((sim.T.topk(k, dim=1).indices == label).any(1).sum())
        total += 2 * batch
    return hits / total


def knn_distance(queries: torch.Tensor, reference: torch.Tensor, k: int = 5) -> torch.Tensor:
    """Cosine distance of each query to its k-th nearest reference row (the official OOD score), [N]."""
    queries, reference = check_embeddings(queries, "queries"), check_embeddings(reference, "reference")
    if not 1 <= k <= reference.shape[0]:
        raise IsoEnergyError(f"k must be in [1, {reference.shape[0]}], got {k}")
    d = 1 - F.normalize(queries.double(), dim=1) @ F.normalize(reference.double(), dim=1).T
    return d.kthvalue(k, dim=1).values


def edit_scores(
    sae, report: EnergyReport, source, edit, target, *, batch: int = 256, seed: int = 0, k_ood: int = 5
) -> dict[str, dict[str, float]]:
    """For the baseline (all atoms of the edit) and the bimodal edit: recall@10, recall@50, their mean (the
    score) and the mean OOD distance to the targets; the targets themselves as the in-distribution reference."""
    target = check_embeddings(target, "target")
    tgt = F.normalize(restrict(sae, target, report, "all"), dim=1)
    batch = min(batch, tgt.shape[0])
    out: dict[str, dict[str, float]] = {}
    for name, keep in (("baseline (all atoms)", "all"), ("bimodal edit", "bimodal")):
        q = vector_edit(sae, report, source, edit, keep)
        r10, r50 = (recall_at_k(q, tgt, min(k, batch), batch, seed) for k in (10, 50))
        out[name] = {"recall@10": r10, "recall@50": r50, "score": (r10 + r50) / 2,
                     "ood": float(knn_distance(q, tgt, k_ood).mean())}  # fmt: skip
    out["targets (reference)"] = {"ood": float(knn_distance(tgt, tgt, k_ood).mean())}
    return out
