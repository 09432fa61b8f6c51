"""Profile metrics: guide consistency (GC) with a permutation null and BH, relationship recall (TPR@FPR, AUC)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd


@dataclass
class GCResult:
    """``fraction``: share of genes (≥ 2 guides) with BH-significant GC; ``table``: gc, p, q, significant."""

    fraction: float
    table: pd.DataFrame


@dataclass
class RecallResult:
    """``tpr`` at the requested FPR, ``auc`` (ROC AUC), ``roc`` (fpr, tpr, threshold)."""

    tpr: float
    auc: float
    roc: pd.DataFrame


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12, None)


def mean_pairwise_cosine(x: np.ndarray) -> float:
    """Mean cosine over the k(k−1)/2 pairs of rows of ``x`` [k, D]."""
    u = _unit(np.asarray(x, dtype=np.float64))
    sim = u @ u.T
    k = len(u)
    return float((sim.sum() - np.trace(sim)) / (k * (k - 1)))


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """BH-adjusted p-values (q-values), as ``scipy.stats.false_discovery_control(p, method="bh")``."""
    p = np.asarray(p, dtype=np.float64)
    n = len(p)
    order = np.argsort(p)
    ranked = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.clip(q, 0, 1)
    return out


def guide_consistency(
    guide_profiles: pd.DataFrame,
    gene_of_guide: Mapping[str, str],
    *,
    n_null: int | None = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    controls: Iterable[str] = ("NTC",),
) -> GCResult:
    """GC of each gene with ≥ 2 guides = mean pairwise cosine of its guides' profiles. Null: ``n_null`` random
    guide sets of the same size from other (non-control) genes; p = (1 + #{null ≥ obs})/(n_null + 1).
    ``n_null=None`` enumerates every subset instead (exact; small screens only). BH at ``alpha``."""
    rng = np.random.default_rng(seed)
    controls = set(controls)
    guides = [
        g
        for g in guide_profiles.index
        if gene_of_guide.get(g) is not None and gene_of_guide[g] not in controls
    ]
    genes = pd.Series({g: gene_of_guide[g] for g in guides})
    X = _unit(guide_profiles.loc[guides].to_numpy(dtype=np.float64))
    sim = X @ X.T
    pos = {g: i for i, g in enumerate(guides)}
    rows = []
    for gene, members in genes.groupby(genes).groups.items():
        if len(members) < 2:
            continue
        idx = [pos[g] for g in members]
        obs = mean_pairwise_cosine(X[idx])
        others = np.array([pos[g] for g in guides if genes[g] != gene])
        k = len(idx)
        if n_null is None:
            null = np.array([mean_pairwise_cosine(X[list(c)]) for c in combinations(others, k)])
        else:  # n_null sets of k distinct guides (the first k of a random permutation), scored at once
            sets = others[rng.random((n_null, len(others))).argsort(1)[:, :k]]
            sub = sim[sets[:, :, None], sets[:, None, :]]
            null = (sub.sum((1, 2)) - np.trace(sub, axis1=1, axis2=2)) / (k * (k - 1))
        p = (1 + np.sum(null >= obs - 1e-12)) / (len(null) + 1)
        rows.append((gene, k, obs, p))
    table = pd.DataFrame(rows, columns=["gene", "n_guides", "gc", "p"]).set_index("gene")
    table["q"] = benjamini_hochberg(table["p"].to_numpy()) if len(table) else []
    table["significant"] = table["q"] < alpha
    return GCResult(float(table["significant"].mean()) if len(table) else float("nan"), table)


def roc(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC points (fpr, tpr, thresholds) at every distinct score, thresholds descending, starting at (0, 0)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order]
    last = np.r_[np.diff(s) != 0, True]  # last index of each tied group
    tp, fp = np.cumsum(y)[last], np.cumsum(~y)[last]
    tpr = np.r_[0.0, tp / max(y.sum(), 1)]
    fpr = np.r_[0.0, fp / max((~y).sum(), 1)]
    return fpr, tpr, np.r_[np.inf, s[last]]


def relationship_recall(
    gene_profiles: pd.DataFrame, positive_pairs: Iterable[tuple[str, str]], *, fpr: float = 0.05
) -> RecallResult:
    """Score every gene pair by the cosine of their profiles; positives = ``positive_pairs``. TPR at ``fpr`` is
    the largest TPR over ROC points with FPR ≤ ``fpr``; AUC by the trapezoid rule over the ROC."""
    genes = list(gene_profiles.index)
    u = _unit(gene_profiles.to_numpy(dtype=np.float64))
    sim = u @ u.T
    pos = {frozenset(p) for p in positive_pairs}
    iu = np.triu_indices(len(genes), 1)
    scores = sim[iu]
    labels = np.array([frozenset((genes[i], genes[j])) in pos for i, j in zip(*iu, strict=True)])
    f, t, th = roc(scores, labels)
    tpr = float(t[f <= fpr + 1e-12].max())
    auc = float(np.trapezoid(t, f))
    return RecallResult(tpr, auc, pd.DataFrame({"fpr": f, "tpr": t, "threshold": th}))
