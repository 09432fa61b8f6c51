"""The modality gap and cross-modal retrieval, and the classic gap-removal baselines.

* DiM = ‖mean(I) − mean(T)‖₂ (difference in means).
* Wasserstein: exact optimal transport with cosine cost 1 − cos(I_i, T_j) between ``n``-row subsamples of each
  modality, each drawn from its own tensor (the official gap function drew the text subsample from the image
  tensor; not copied). Equal sizes and uniform weights make it an assignment problem, solved exactly by
  ``scipy.optimize.linear_sum_assignment`` (default) or POT's ``emd`` with ``numItermax=10**8``.
* recall@1: within random batches of ``batch`` pairs, cosine similarity, mean of image→text and text→image.
* Baselines (Liang et al. 2022): per-modality mean centring; shifting each modality by ∓Δ/2, Δ = mean(I) −
  mean(T).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .validate import IsoEnergyError, check_embeddings, check_pairs

GAP_METHODS = ("dim", "wasserstein")
OT_BACKENDS = ("scipy", "pot")


def _cost(a: torch.Tensor, b: torch.Tensor):
    """1 − cos(a_i, b_j) as float64 numpy [n, m]."""
    a = F.normalize(a.double(), dim=1)
    b = F.normalize(b.double(), dim=1)
    return (1.0 - a @ b.T).clamp_min(0.0).numpy()


def wasserstein_cosine(a: torch.Tensor, b: torch.Tensor, backend: str = "scipy") -> float:
    """Exact OT cost between the uniform empirical measures of ``a`` [n, D] and ``b`` [n, D], cosine cost."""
    if backend not in OT_BACKENDS:
        raise IsoEnergyError(f"unknown OT backend {backend!r}; choose one of {', '.join(OT_BACKENDS)}")
    if a.shape[0] != b.shape[0]:
        raise IsoEnergyError(f"equal sample sizes required, got {a.shape[0]} and {b.shape[0]}")
    cost = _cost(a, b)
    if backend == "pot":
        import numpy as np
        import ot

        w = np.full(cost.shape[0], 1.0 / cost.shape[0])
        plan = ot.emd(w, w, cost, numItermax=10**8)
        return float((plan * cost).sum())
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def modality_gap(
    img: torch.Tensor,
    txt: torch.Tensor,
    method: str = "dim",
    n: int = 2000,
    seed: int = 0,
    backend: str = "scipy",
) -> float:
    """The gap between image and text embeddings: ``method`` "dim" or "wasserstein" (module docstring).

    For "wasserstein", m = min(n, N_I, N_T) rows are drawn without replacement from each modality's own
    tensor (seeded).
    """
    img = check_embeddings(img, "image embeddings")
    txt = check_embeddings(txt, "text embeddings")
    if img.shape[1] != txt.shape[1]:
        raise IsoEnergyError(
            f"image and text embeddings have different dimensions ({img.shape[1]} vs {txt.shape[1]})"
        )
    if method == "dim":
        return float((img.double().mean(0) - txt.double().mean(0)).norm())
    if method != "wasserstein":
        raise IsoEnergyError(f"unknown gap method {method!r}; choose one of {', '.join(GAP_METHODS)}")
    m = min(int(n), img.shape[0], txt.shape[0])
    g = torch.Generator().manual_seed(int(seed))
    idx_img = torch.randperm(img.shape[0], generator=g)[:m]
    idx_txt = torch.randperm(txt.shape[0], generator=g)[:m]
    return wasserstein_cosine(img[idx_img], txt[idx_txt], backend)


def recall_at_1(img: torch.Tensor, txt: torch.Tensor, batch: int = 256, seed: int = 0) -> float:
    """Mean of I→T and T→I recall@1 within random batches of ``batch`` pairs (the last partial batch is
    dropped), by cosine similarity. Chance level is 1/batch."""
    img, txt = check_pairs(img, txt)
    n = img.shape[0]
    if n < batch:
        raise IsoEnergyError(f"{n} pairs are fewer than one retrieval batch of {batch}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    a, b = F.normalize(img.double(), dim=1), F.normalize(txt.double(), dim=1)
    hits, total = 0, 0
    target = torch.arange(batch)
    for start in range(0, n - batch + 1, batch):
        idx = perm[start : start + batch]
        sim = a[idx] @ b[idx].T  # [batch, batch]
        hits += int((sim.argmax(dim=1) == target).sum()) + int((sim.argmax(dim=0) == target).sum())
        total += 2 * batch
    return hits / total


def mean_center(img: torch.Tensor, txt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each modality minus its own mean."""
    return img - img.mean(0, keepdim=True), txt - txt.mean(0, keepdim=True)


def shift_gap(img: torch.Tensor, txt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """I − Δ/2 and T + Δ/2 with Δ = mean(I) − mean(T): both means move to their midpoint."""
    delta = img.mean(0, keepdim=True) - txt.mean(0, keepdim=True)
    return img - delta / 2, txt + delta / 2


def gap_row(img: torch.Tensor, txt: torch.Tensor, *, n: int = 2000, batch: int = 256, seed: int = 0) -> dict:
    """DiM, DiM after re-normalising rows to unit length, Wasserstein and recall@1 of one pair of sets."""
    return {
        "dim": modality_gap(img, txt, "dim"),
        "dim_unit": modality_gap(F.normalize(img, dim=1), F.normalize(txt, dim=1), "dim"),
        "wasserstein": modality_gap(img, txt, "wasserstein", n=n, seed=seed),
        "recall@1": recall_at_1(img, txt, batch=batch, seed=seed),
        "mean_norm": float(torch.cat([img, txt]).norm(dim=1).mean()),
    }


def gap_table(
    variants: dict[str, tuple[torch.Tensor, torch.Tensor]], *, n: int = 2000, batch: int = 256, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """{variant: gap_row(...)} for several (img, txt) versions of the same pairs."""
    return {name: gap_row(i, t, n=n, batch=batch, seed=seed) for name, (i, t) in variants.items()}
