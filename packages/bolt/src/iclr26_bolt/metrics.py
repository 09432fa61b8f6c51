"""Decision metrics of an option distribution: accuracy, NLL, Brier, ECE-15, AURC, OCW@0.7, and the
hallucination proxies (IOR, flip rate, NOA misuse).

Definitions (the official code's): ECE with ``n_bins`` equal-width bins (the core's ECE); AURC = mean over
i = 1..N of (errors among the i most confident)/i; OCW@t = share of the wrong predictions whose p_max ≥ t.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr26_core.errors import UserError
from iclr26_core.evaluation import ece as core_ece


def _np(x: Any, dtype: Any = np.float64) -> np.ndarray:
    return x.detach().cpu().numpy().astype(dtype) if hasattr(x, "detach") else np.asarray(x, dtype=dtype)


def aurc(confidence: Any, correct: Any) -> float:
    """Area under the risk-coverage curve: sort by confidence (descending), mean of the running error rate."""
    conf, corr = _np(confidence), _np(correct)
    order = np.argsort(-conf, kind="stable")
    err = 1.0 - corr[order]
    return float(np.mean(np.cumsum(err) / np.arange(1, len(err) + 1)))


def ocw(confidence: Any, correct: Any, threshold: float = 0.7) -> float:
    """Share of the wrong predictions with confidence ≥ threshold (0 when nothing is wrong)."""
    conf, corr = _np(confidence), _np(correct).astype(bool)
    wrong = ~corr
    return float((conf[wrong] >= threshold).mean()) if wrong.any() else 0.0


def decision_metrics(probs: Any, gold: Any, n_bins: int = 15) -> dict[str, float]:
    """acc, nll, brier, ece, aurc and ocw@0.7 of probabilities [N, K] against gold indices [N]."""
    p, y = _np(probs), _np(gold, np.int64)
    if p.ndim != 2 or len(p) != len(y) or len(y) == 0:
        raise UserError(f"decision_metrics needs probs [N, K] and gold [N]; got {p.shape} and {y.shape}")
    if (y < 0).any() or (y >= p.shape[1]).any():
        raise UserError("decision_metrics: a gold index is out of range")
    n = len(y)
    pred = p.argmax(1)
    correct = (pred == y).astype(np.float64)
    conf = p.max(1)
    onehot = np.zeros_like(p)
    onehot[np.arange(n), y] = 1.0
    return {
        "acc": float(correct.mean()),
        "nll": float(np.mean(-np.log(np.clip(p[np.arange(n), y], 1e-12, 1.0)))),
        "brier": float(np.mean(((p - onehot) ** 2).sum(1))),
        "ece": core_ece(p, y, n_bins=n_bins),
        "aurc": aurc(conf, correct),
        "ocw@0.7": ocw(conf, correct, 0.7),
        "confidence": float(conf.mean()),
    }


def invalid_option_rate(predictions: Sequence[str], options: Sequence[Sequence[str]]) -> float:
    """IOR: share of predicted texts that are not (after stripping) one of the item's options."""
    bad = sum(
        p.strip() not in {o.strip() for o in opts} for p, opts in zip(predictions, options, strict=True)
    )
    return bad / max(len(predictions), 1)


def flip_rate(pass1: Any, final: Any) -> float:
    """Share of items whose final choice differs from the pass-1 choice."""
    a, b = _np(pass1, np.int64), _np(final, np.int64)
    return float((a != b).mean()) if len(a) else 0.0


def noa_misuse(predictions: Sequence[str], gold_texts: Sequence[str]) -> float:
    """Share of items where "none of the above" is predicted and the gold is something else."""

    def noa(s: str) -> bool:
        return s.strip().lower() == "none of the above"

    n = len(predictions)
    return sum(noa(p) and not noa(g) for p, g in zip(predictions, gold_texts, strict=True)) / max(n, 1)
