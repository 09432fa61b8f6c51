"""Decision metrics against independent computations (torchmetrics ECE, brute-force AURC, Brier, OCW)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_bolt import decision_metrics
from iclr26_bolt.metrics import aurc, invalid_option_rate, ocw
from iclr26_core.testing import naive_ece


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4) * 0.7, size=500)
    y = np.array([rng.choice(4, p=row) if rng.random() < 0.8 else rng.integers(4) for row in p])
    return p, y


def test_ece_against_torchmetrics_or_naive(sample):
    p, y = sample
    got = decision_metrics(p, y)["ece"]
    assert got == pytest.approx(naive_ece(p, y, n_bins=15), abs=1e-9)
    tm = pytest.importorskip("torchmetrics.functional.classification")
    ref = tm.multiclass_calibration_error(
        torch.tensor(p), torch.tensor(y), num_classes=4, n_bins=15, norm="l1"
    )
    assert got == pytest.approx(float(ref), abs=1e-5)


def test_aurc_brute_force(sample):
    p, y = sample
    conf, correct = p.max(1), (p.argmax(1) == y).astype(float)
    order = sorted(range(len(y)), key=lambda i: -conf[i])
    ref = np.mean([sum(1 - correct[j] for j in order[: i + 1]) / (i + 1) for i in range(len(y))])
    assert aurc(conf, correct) == pytest.approx(ref, abs=1e-12)


def test_brier_nll_acc_ocw(sample):
    p, y = sample
    m = decision_metrics(p, y)
    onehot = np.eye(4)[y]
    assert m["brier"] == pytest.approx(float(((p - onehot) ** 2).sum(1).mean()))
    assert m["nll"] == pytest.approx(float(-np.log(p[np.arange(len(y)), y]).mean()))
    assert m["acc"] == pytest.approx(float((p.argmax(1) == y).mean()))
    wrong = p.argmax(1) != y
    assert m["ocw@0.7"] == pytest.approx(float((p.max(1)[wrong] >= 0.7).mean()))
    assert ocw([0.9, 0.8, 0.5], [1, 0, 0]) == pytest.approx(0.5)


def test_invalid_option_rate():
    assert invalid_option_rate(["cup", " plate ", "cu"], [["cup", "plate"]] * 3) == pytest.approx(1 / 3)
