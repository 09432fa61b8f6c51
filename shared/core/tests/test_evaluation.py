"""Metrics against hand computations and independent implementations."""

import math

import numpy as np
import pytest
import torch

from iclr26_core.evaluation import (
    accuracy,
    bootstrap_ci,
    calibration_bins,
    ece,
    mc_accuracy,
    miou,
    perplexity,
    psnr,
    reliability_diagram,
    ssim,
)
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import char_tokenizer


def test_perplexity_matches_manual_cross_entropy():
    model = tiny_model("llama", vocab_size=37)
    ids = torch.randint(0, 37, (5, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    # manual: softmax + log of the probability of each next token, summed in float64
    probs = torch.softmax(logits.double(), -1)
    nll = 0.0
    for b in range(5):
        for t in range(8):
            nll -= math.log(float(probs[b, t, ids[b, t + 1]]))
    expected = math.exp(nll / (5 * 8))
    assert perplexity(model, ids, batch_size=2) == pytest.approx(expected, rel=1e-5)


def test_mc_accuracy_prefers_the_likely_continuation():
    tok = char_tokenizer("ab")
    model = tiny_model("llama", vocab_size=len(tok))
    bias = torch.zeros(len(tok))  # make token 'a' (id 3) overwhelmingly likely after anything
    bias[3] = 10.0
    model.lm_head.register_forward_hook(lambda m, i, o: o + bias)
    res = mc_accuracy(model, tok, ["ab", "ba"], [["aa", "bb"], ["bb", "aa"]], [0, 1])
    assert res["predictions"] == [0, 1] and res["accuracy"] == 1.0


def test_ece_hand_example():
    conf = np.array([0.95, 0.95, 0.65, 0.65, 0.25])
    correct = np.array([1, 0, 1, 1, 0])
    # bins (n=10): 0.95 -> bin 9, acc 0.5, gap 0.45 (weight 2/5); 0.65 -> bin 6, acc 1, gap 0.35 (2/5);
    # 0.25 -> bin 2, acc 0, gap 0.25 (1/5)
    expected = 2 / 5 * 0.45 + 2 / 5 * 0.35 + 1 / 5 * 0.25
    assert ece(conf, correct) == pytest.approx(expected)
    probs = np.array([[0.95, 0.05], [0.05, 0.95], [0.65, 0.35], [0.35, 0.65], [0.25, 0.75]])
    labels = np.array([0, 0, 0, 1, 0])  # correct: 1, 0, 1, 1, 0 ; confidences 0.95,0.95,0.65,0.65,0.75
    expected2 = 2 / 5 * 0.45 + 2 / 5 * 0.35 + 1 / 5 * 0.75
    assert ece(probs, labels) == pytest.approx(expected2)
    b = calibration_bins([0.0, 1.0], [1, 1], n_bins=4)
    assert b["count"].tolist() == [1, 0, 0, 1]
    assert reliability_diagram(conf, correct).axes[0].get_title().startswith("ECE=")


def test_ece_equals_the_naive_loop_on_random_probabilities_and_the_naive_loop_the_hand_example():
    from iclr26_core.testing import naive_ece

    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4) * 0.7, size=500)
    labels = rng.integers(0, 4, 500)
    for n_bins in (10, 15, 20):
        assert ece(probs, labels, n_bins=n_bins) == pytest.approx(naive_ece(probs, labels, n_bins), abs=1e-12)
    probs = np.array([[0.95, 0.05], [0.05, 0.95], [0.65, 0.35], [0.35, 0.65], [0.25, 0.75]])
    assert naive_ece(probs, np.array([0, 0, 0, 1, 0])) == pytest.approx(
        2 / 5 * 0.45 + 2 / 5 * 0.35 + 1 / 5 * 0.75
    )


def test_accuracy():
    assert accuracy([1, 2, 3], [1, 0, 3]) == pytest.approx(2 / 3)
    assert accuracy([[0.1, 0.9], [0.8, 0.2]], [1, 1]) == 0.5
    with pytest.raises(ValueError):
        accuracy([1, 2], [1, 2, 3])


def test_miou_hand_example():
    pred = np.array([[0, 0, 1], [1, 2, 2]])
    target = np.array([[0, 1, 1], [1, 2, 0]])
    # class 0: inter 1, union 3; class 1: inter 2, union 3; class 2: inter 1, union 2
    assert miou(pred, target, 3) == pytest.approx((1 / 3 + 2 / 3 + 1 / 2) / 3)
    # ignoring target 0 keeps pred [0, 1, 1, 2] vs target [1, 1, 1, 2]: IoUs 0, 2/3, 1
    assert miou(pred, target, 3, ignore_index=0) == pytest.approx((0 + 2 / 3 + 1) / 3)


def test_psnr_ssim_match_scikit_image():
    skm = pytest.importorskip("skimage.metrics")
    rng = np.random.default_rng(0)
    a = rng.random((40, 33))
    b = np.clip(a + 0.1 * rng.standard_normal(a.shape), 0, 1)
    assert psnr(b, a) == pytest.approx(skm.peak_signal_noise_ratio(a, b, data_range=1.0), rel=1e-9)
    assert ssim(b, a) == pytest.approx(skm.structural_similarity(a, b, data_range=1.0), rel=1e-7)
    rgb_a, rgb_b = rng.random((30, 31, 3)), rng.random((30, 31, 3))
    assert ssim(rgb_b, rgb_a, channel_axis=-1) == pytest.approx(
        skm.structural_similarity(rgb_a, rgb_b, data_range=1.0, channel_axis=-1), rel=1e-7
    )
    assert psnr(a, a) == math.inf


def test_bootstrap_ci_matches_normal_closed_form():
    x = np.random.default_rng(1).normal(2.0, 3.0, size=2000)
    est, lo, hi = bootstrap_ci(x, n_boot=2000, seed=0)
    half = 1.959964 * x.std(ddof=1) / math.sqrt(len(x))
    assert est == pytest.approx(x.mean())
    assert lo == pytest.approx(x.mean() - half, abs=0.15 * half)
    assert hi == pytest.approx(x.mean() + half, abs=0.15 * half)
