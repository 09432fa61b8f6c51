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
from iclr26_petri.sae import aux_k_loss, band_rule, train_sae


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


def test_gc_sampled_null_matches_enumeration():
    """The sampled null (random k-subsets scored at once) converges to the exact enumeration of all subsets."""
    rng = np.random.default_rng(5)
    guides = [f"s{i}" for i in range(12)]
    gene_of = {g: "ABCD"[i // 3] for i, g in enumerate(guides)}
    X = rng.normal(size=(12, 5))
    X[:3] += 0.8 * rng.normal(size=5)
    prof = pd.DataFrame(X, index=guides)
    n_sets = len(list(combinations(range(9), 3)))  # each gene's null: 3-subsets of the other 9 guides
    exact = guide_consistency(prof, gene_of, n_null=None).table["p"] * (n_sets + 1) - 1
    sampled = guide_consistency(prof, gene_of, n_null=20_000, seed=1).table["p"] * 20_001 - 1
    np.testing.assert_allclose(sampled / 20_000, exact / n_sets, atol=0.01)  # tail fractions #{null >= obs}/n


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


def test_aux_k_loss_against_a_per_sample_loop():
    torch.manual_seed(0)
    sae = BatchTopKSAE(6, 20, k=2).train()
    x = torch.randn(9, 6)
    x_hat, _ = sae(x)
    dead = torch.zeros(20, dtype=torch.bool)
    dead[[1, 4, 5, 11, 17]] = True
    loss = aux_k_loss(sae, x, x_hat, dead, aux_k=3)
    with torch.no_grad():
        pre = torch.relu((x - sae.b_dec) @ sae.W_enc.T + sae.b_enc).numpy()
        W, r = sae.W_dec.numpy(), (x - x_hat).numpy()
    cols = np.flatnonzero(dead.numpy())
    ref = 0.0
    for i in range(len(x)):
        top = cols[np.argsort(-pre[i, cols])[:3]]
        ref += float(((W[:, top] * pre[i, top]).sum(1) - r[i]) ** 2 @ np.ones(6)) / len(x)
    assert float(loss.detach()) == pytest.approx(ref, rel=1e-5)
    assert float(aux_k_loss(sae, x, x_hat, torch.zeros(20, dtype=torch.bool), 3)) == 0.0


def test_aux_k_loss_reaches_latents_outside_the_batch_topk():
    """Latents that never win the batch top-k get no encoder gradient from the MSE, only from the aux loss."""
    torch.manual_seed(0)
    sae = BatchTopKSAE(8, 64, k=1).train()
    x = torch.randn(16, 8)
    x_hat, z = sae(x)
    dead = ~(z > 0).any(0)
    (x_hat - x).pow(2).sum(-1).mean().backward()
    assert dead.sum() > 10 and float(sae.W_enc.grad[dead].abs().max()) == 0.0
    sae.zero_grad()
    aux_k_loss(sae, x, x_hat.detach(), dead, aux_k=4).backward()
    reached = sae.W_enc.grad[dead].abs().sum(1) > 0
    assert int(reached.sum()) >= 4
    sae2 = train_sae(x, n_latents=64, k=1, steps=3, seed=0, aux_k=4, dead_after=1)  # the option runs
    assert torch.isfinite(sae2.W_enc).all()


def test_band_rule_on_hand_made_frequencies():
    fi = torch.tensor([0.05, 0.1, 0.5, 0.9, 0.95, 0.5])
    fe = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.5, 0.0])
    assert band_rule(fi, fe).tolist() == [False, True, True, True, False, False]
