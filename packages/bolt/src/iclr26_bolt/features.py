"""The router's cheap signals, computed from the calibrated option distribution p.

f = [p_max, Δ, H, ρ, κ]:
    p_max = p₍₁₎ (confidence), Δ = p₍₁₎ − p₍₂₎ (margin), H = −Σ_k p_k log p_k (entropy, nats),
    ρ = mean cosine of the top-K_r same-type exemplars in the retrieval memory (retrieval affinity),
    κ = 1 − mean pairwise JS divergence (nats) among the K_d question-decomposition distributions,
        clipped to [0, 1] (agreement; available only after QD has run).
The official router decides on the first four; κ is a refresh feature. NaN marks an unavailable signal.
"""

from __future__ import annotations

import itertools
import re

import torch

FEATURES = ("p_max", "margin", "entropy", "rho", "kappa")


def entropy(p: torch.Tensor) -> torch.Tensor:
    """H(p) = −Σ p log p in nats over the last axis (0·log 0 = 0)."""
    return -torch.special.xlogy(p, p).sum(-1)


def margin(p: torch.Tensor) -> torch.Tensor:
    """p₍₁₎ − p₍₂₎ over the last axis (K ≥ 2)."""
    top = p.topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def js_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence in nats: ½KL(p‖m) + ½KL(q‖m), m = (p + q)/2, over the last axis."""
    m = 0.5 * (p + q)
    kl_pm = (torch.special.xlogy(p, p) - torch.special.xlogy(p, m)).sum(-1)
    kl_qm = (torch.special.xlogy(q, q) - torch.special.xlogy(q, m)).sum(-1)
    return 0.5 * (kl_pm + kl_qm)


def agreement(qd_probs: torch.Tensor) -> torch.Tensor:
    """κ = clip(1 − mean pairwise JS, 0, 1) over the K_d distributions. qd_probs: [B, K_d, K] → [B]."""
    kd = qd_probs.shape[-2]
    if kd < 2:
        return torch.ones(qd_probs.shape[:-2], dtype=qd_probs.dtype)
    pairs = list(itertools.combinations(range(kd), 2))
    js = torch.stack([js_divergence(qd_probs[..., i, :], qd_probs[..., j, :]) for i, j in pairs], -1)
    return (1.0 - js.mean(-1)).clamp(0.0, 1.0)


def router_features(
    probs: torch.Tensor, affinity: torch.Tensor | None = None, qd_probs: torch.Tensor | None = None
) -> torch.Tensor:
    """[B, 5] features [p_max, Δ, H, ρ, κ] from calibrated probabilities [B, K] (zero-padded for ragged K).

    ``affinity``: [B] retrieval affinities ρ; ``qd_probs``: [B, K_d, K]. A missing signal is NaN.
    """
    p = probs.double()
    b = p.shape[0]
    nan = torch.full((b,), float("nan"), dtype=torch.float64)
    rho = nan if affinity is None else affinity.double().reshape(b)
    kappa = nan if qd_probs is None else agreement(qd_probs.double())
    return torch.stack([p.max(-1).values, margin(p), entropy(p), rho, kappa], dim=-1).float()


def retrieval_affinity(similarities: torch.Tensor) -> torch.Tensor:
    """ρ = mean of the top-K_r cosine similarities: [B, K_r] → [B]."""
    return similarities.mean(-1)


def question_type(question: str, options: list[str] | None = None) -> str:
    """The official heuristic type key for type-matched retrieval: yn, arrows, colors, letters or other."""
    q = (question or "").lower()

    def norm(s: str) -> str:
        return re.sub(r"\s+", " ", re.sub(r"[\s.,!?:;]+$", "", s.strip())).lower()

    opts = {norm(o) for o in options or []}
    if len(options or []) == 2 and opts == {"yes", "no"}:
        return "yn"
    if "colored arrow" in q:
        return "arrows"
    if "colored point" in q:
        return "colors"
    if "goal state" in q or "configuration" in q:
        return "letters"
    if opts.issuperset({"red", "blue", "green"}) and "none of the above" in opts:
        return "colors"
    return "other"
