"""Profiles, GC, BH, ROC and the SAE against independent computations."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

from iclr26_petri import (
    BatchTopKSAE,
    benjamini_hochberg,
    guide_consistency,
    relationship_recall,
    robust_center_scale,
    spherize,
)
from iclr26_petri.sae import band_rule


def test_robust_center_scale_against_naive():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4)) * [1, 2, 3, 4] + 5
    ctrl = np.zeros(30, bool)
    ctrl[::3] = True
    z = robust_center_scale(x, ctrl)
    for j in range(4):
        col = sorted(x[ctrl, j])
        n = len(col)
        med = (col[n // 2] + col[(n - 1) // 2]) / 2
        dev = sorted(abs(v - med) for v in col)
        mad = (dev[n // 2] + dev[(n - 1) // 2]) / 2
        np.testing.assert_allclose(z[:, j], (x[:, j] - med) / (1.4826 * mad + 1e-18))


def test_spherize_whitens_controls():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 5)) @ rng.normal(size=(5, 5))
    ctrl = rng.random(200) < 0.5
    w = spherize(x, ctrl)
    cov = np.cov(w[ctrl], rowvar=False)
    np.testing.assert_allclose(cov, np.eye(5), atol=1e-4)


def test_bh_matches_scipy():
    p = np.random.default_rng(2).uniform(size=40) ** 2
    np.testing.assert_allclose(
        benjamini_hochberg(p), stats.false_discovery_control(p, method="bh"), atol=1e-12
    )


def test_recall_against_sklearn():
    rng = np.random.default_rng(3)
    genes = [f"g{i}" for i in range(14)]
    prof = pd.DataFrame(rng.normal(size=(14, 6)), index=genes)
    pos = [(genes[i], genes[j]) for i, j in combinations(range(14), 2) if (i + j) % 5 == 0]
    res = relationship_recall(prof, pos, fpr=0.05)
    u = prof.to_numpy() / np.linalg.norm(prof.to_numpy(), axis=1, keepdims=True)
    iu = np.triu_indices(14, 1)
    scores = (u @ u.T)[iu]
    labels = np.array([(i + j) % 5 == 0 for i, j in zip(*iu, strict=True)])
    f, t, _ = roc_curve(labels, scores, drop_intermediate=False)
    assert res.tpr == pytest.approx(t[f <= 0.05].max())
    assert res.auc == pytest.approx(roc_auc_score(labels, scores))


def test_gc_pvalues_by_brute_force():
    rng = np.random.default_rng(4)
    guides = [f"s{i}" for i in range(6)]
    gene_of = dict(zip(guides, ["A", "A", "B", "B", "C", "C"], strict=True))
    base = rng.normal(size=6)
    X = np.stack(
        [base + 0.3 * rng.normal(size=6) if g in ("s0", "s1") else rng.normal(size=6) for g in guides]
    )
    prof = pd.DataFrame(X, index=guides)
    res = guide_consistency(prof, gene_of, n_null=None)
    u = X / np.linalg.norm(X, axis=1, keepdims=True)
    for gene, idx in (("A", [0, 1]), ("B", [2, 3]), ("C", [4, 5])):
        obs = float(u[idx[0]] @ u[idx[1]])
        others = [i for i in range(6) if i not in idx]
        null = [float(u[a] @ u[b]) for a, b in combinations(others, 2)]
        p = (1 + sum(v >= obs - 1e-12 for v in null)) / (len(null) + 1)
        assert res.table.loc[gene, "gc"] == pytest.approx(obs)
        assert res.table.loc[gene, "p"] == pytest.approx(p)
    q = stats.false_discovery_control(res.table["p"].to_numpy(), method="bh")
    np.testing.assert_allclose(res.table["q"], q)


def test_batch_topk_keeps_k_times_b_in_training():
    torch.manual_seed(0)
    sae = BatchTopKSAE(6, 40, k=3).train()
    x = torch.randn(17, 6)
    z = sae.encode(x)
    assert int((z > 0).sum()) == 3 * 17
    pre = sae.pre_activations(x)
    kept = pre[z > 0]
    assert kept.min() >= pre[(z == 0) & (pre > 0)].max() if ((z == 0) & (pre > 0)).any() else True


def test_threshold_codes_do_not_depend_on_batch():
    torch.manual_seed(0)
    sae = BatchTopKSAE(6, 40, k=3).train()
    for _ in range(5):
        sae.encode(torch.randn(32, 6))
    sae.eval()
    x = torch.randn(64, 6)
    assert sae.threshold > 0
    with torch.no_grad():
        big, one = sae.encode(x)[11], sae.encode(x[11:12])[0]
    assert torch.equal(big > 0, one > 0) and torch.allclose(big, one, atol=1e-6)  # same support, same values
    assert int((big > 0).sum()) > 0


def test_band_rule_on_hand_made_frequencies():
    fi = torch.tensor([0.05, 0.1, 0.5, 0.9, 0.95, 0.5])
    fe = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.5, 0.0])
    assert band_rule(fi, fe).tolist() == [False, True, True, True, False, False]
