"""The ODD loss against a manual KL/CE formula, its invariances, gradients and label smoothing."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_bolt import odd_loss


def manual(s, pt, y, lkl=1.0, lce=0.1, eps=0.0):
    """Plain-Python KL(p_T || p_S) + CE with label smoothing, one item."""
    z = [math.exp(v - max(s)) for v in s]
    ps = [max(v / sum(z), 1e-8) for v in z]
    tot = sum(pt)
    pt = [max(v / tot, 1e-8) for v in pt]
    kl = sum(a * (math.log(a) - math.log(b)) for a, b in zip(pt, ps, strict=True))
    k = len(s)
    target = [eps / k + (1 - eps) * (j == y) for j in range(k)]
    ce = -sum(t * math.log(p) for t, p in zip(target, ps, strict=True))
    return lkl * kl + lce * ce


def test_matches_manual_formula():
    g = torch.Generator().manual_seed(0)
    s = torch.randn(5, 4, generator=g) * 3
    pt = torch.softmax(torch.randn(5, 4, generator=g), -1)
    y = torch.tensor([0, 3, 1, 2, 2])
    got = float(odd_loss(s, pt, y, lambda_kl=0.7, lambda_ce=0.3, label_smoothing=0.1))
    ref = sum(manual(s[i].tolist(), pt[i].tolist(), int(y[i]), 0.7, 0.3, 0.1) for i in range(5)) / 5
    assert got == pytest.approx(ref, abs=1e-5)


def test_shift_invariance_and_zero_at_match():
    s = torch.randn(3, 5)
    pt = torch.softmax(torch.randn(3, 5), -1)
    y = torch.tensor([1, 0, 4])
    a = odd_loss(s, pt, y)
    b = odd_loss(s + torch.tensor([[7.0], [-3.0], [100.0]]), pt, y)
    assert torch.allclose(a, b, atol=1e-5)
    assert float(odd_loss(pt.log(), pt, y, lambda_ce=0.0)) == pytest.approx(0.0, abs=1e-6)


def test_ragged_lists_equal_per_item_losses():
    s = [torch.randn(2), torch.randn(5), torch.randn(3)]
    pt = [torch.softmax(torch.randn(len(x)), -1) for x in s]
    y = [1, 4, -1]  # -1: no gold, the CE term is skipped
    got = float(odd_loss(s, pt, y))
    ref = (manual(s[0].tolist(), pt[0].tolist(), 1) + manual(s[1].tolist(), pt[1].tolist(), 4)
           + manual(s[2].tolist(), pt[2].tolist(), -1, lce=0.0)) / 3  # fmt: skip
    assert got == pytest.approx(ref, abs=1e-5)


def test_finite_gradients_at_extreme_scores():
    s = torch.tensor([[1e4, -1e4, 0.0, 5e3]], requires_grad=True)
    pt = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    loss = odd_loss(s, pt, torch.tensor([1]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(s.grad).all()


def test_label_smoothing_formula():
    s = torch.tensor([[2.0, 0.5, -1.0]])
    pt = torch.tensor([[1 / 3, 1 / 3, 1 / 3]])
    logp = torch.log_softmax(s, -1)[0]
    eps = 0.3
    ce = -((1 - eps) * logp[0] + eps / 3 * logp.sum())
    kl = (pt[0] * (pt[0].log() - logp)).sum()
    got = odd_loss(s, pt, torch.tensor([0]), lambda_kl=1.0, lambda_ce=1.0, label_smoothing=eps)
    assert float(got) == pytest.approx(float(kl + ce), abs=1e-5)
