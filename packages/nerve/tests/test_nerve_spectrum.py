"""The maths against independent numpy/scipy computations and known answers."""

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from iclr26_nerve import (
    NerVEError,
    StreamingCovariance,
    eigenspectrum,
    eigenvalue_early_enrichment,
    jensen_shannon,
    layer_metrics,
    participation_ratio,
    spectral_entropy,
)
from iclr26_nerve.spectrum import js_divergence, rankme


def _naive(eigs):
    """Naive float64 loops, written from the formulas in the paper."""
    lam = [float(v) for v in eigs]
    lam.sort(reverse=True)
    total = sum(lam)
    p = [v / total for v in lam]
    se = -sum(x * math.log(x) for x in p if x > 0)
    pr = total**2 / sum(v * v for v in lam)
    d = len(p)
    s, eee = 0.0, 0.0
    for k in range(1, d + 1):
        s += p[k - 1]
        eee += s - k / d
    return se, pr, min(max(2 * eee / d, 0.0), 1.0)


def _naive_js(a, b):
    p = sorted((float(x) for x in a), reverse=True)
    q = sorted((float(x) for x in b), reverse=True)
    n = max(len(p), len(q))
    p, q = p + [0.0] * (n - len(p)), q + [0.0] * (n - len(q))
    sp, sq = sum(p), sum(q)
    p, q = [x / sp for x in p], [x / sq for x in q]
    js = 0.0
    for x, y in zip(p, q):
        m = (x + y) / 2
        js += 0.5 * x * math.log((x + 1e-12) / (m + 1e-12)) + 0.5 * y * math.log((y + 1e-12) / (m + 1e-12))
    return js


def test_eigenspectrum_equals_numpy_cov():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 17)) @ rng.normal(size=(17, 17)) + 3.0
    got = eigenspectrum(torch.from_numpy(x), dtype=torch.float64).numpy()
    want = np.clip(np.sort(np.linalg.eigvalsh(np.cov(x.T)))[::-1], 1e-12, None)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert np.all(np.diff(got) <= 0)


def test_uncentred_second_moment():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 9)) + 2.0
    got = eigenspectrum(torch.from_numpy(x), center=False, dtype=torch.float64).numpy()
    want = np.sort(np.linalg.eigvalsh(x.T @ x / (len(x) - 1)))[::-1]
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_streaming_covariance_is_exact_for_any_chunking():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(257, 11)) * 5 + 100.0  # a large mean: the naive sum-of-squares formula loses digits
    acc = StreamingCovariance(11, dtype=torch.float64)
    for chunk in np.array_split(x, [3, 4, 100, 101, 200]):
        acc.update(torch.from_numpy(chunk))
    np.testing.assert_allclose(acc.covariance().numpy(), np.cov(x.T), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_equal_naive_loops(seed):
    rng = np.random.default_rng(seed)
    eigs = np.sort(rng.exponential(size=40) ** 3)[::-1]
    se, pr, eee = _naive(eigs)
    assert spectral_entropy(eigs) == pytest.approx(se, rel=1e-12)
    assert participation_ratio(eigs) == pytest.approx(pr, rel=1e-12)
    assert eigenvalue_early_enrichment(eigs) == pytest.approx(eee, rel=1e-12)
    other = rng.exponential(size=25)
    assert jensen_shannon(eigs, other) == pytest.approx(_naive_js(eigs, other), rel=1e-10)


def test_js_equals_scipy_jensenshannon_squared():
    rng = np.random.default_rng(3)
    p, q = np.sort(rng.random(30))[::-1], np.sort(rng.random(30))[::-1]
    want = jensenshannon(p / p.sum(), q / q.sum()) ** 2  # natural base by default
    assert jensen_shannon(p, q) == pytest.approx(want, rel=1e-8)


def test_isotropic_gaussian():
    x = torch.randn(20000, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eigs = eigenspectrum(x, dtype=torch.float64)
    assert participation_ratio(eigs) >= 0.95 * 32
    assert abs(spectral_entropy(eigs) - math.log(32)) < 0.01
    # sampling spread (Marchenko–Pastur half-width a = 2·sqrt(D/N)) gives EEE ≈ a/3: 0.027 at N = 20000,
    # so the spec's "EEE < 0.02" needs more rows; N = 50000 gives a/3 ≈ 0.017
    assert eigenvalue_early_enrichment(eigs) < 2 * math.sqrt(32 / 20000) / 3 + 0.005
    x = torch.randn(50000, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert eigenvalue_early_enrichment(eigenspectrum(x, dtype=torch.float64)) < 0.02


def test_rank_one_data():
    g = torch.Generator().manual_seed(0)
    d = 24
    x = torch.randn(500, 1, generator=g, dtype=torch.float64) * torch.randn(
        1, d, generator=g, dtype=torch.float64
    )
    eigs = eigenspectrum(x, dtype=torch.float64)
    assert participation_ratio(eigs) == pytest.approx(1.0, abs=1e-6)
    assert spectral_entropy(eigs) < 1e-4
    assert eigenvalue_early_enrichment(eigs) == pytest.approx(1 - 1 / d, abs=1e-6)


def test_js_known_answers():
    p = np.array([3.0, 2.0, 1.0])
    assert jensen_shannon(p, p) == pytest.approx(0.0, abs=1e-15)
    # disjoint supports (distributions as given, before rank alignment)
    assert js_divergence([1.0, 0.0, 0.0], [0.0, 0.5, 0.5]) == pytest.approx(math.log(2), abs=1e-9)
    # after sorting, two spectra always share their top mode, so rank-aligned JS stays below ln 2
    assert jensen_shannon([1.0, 0.0], [0.0, 1.0]) == pytest.approx(0.0, abs=1e-12)
    # rank alignment: only the sorted spectra matter
    assert jensen_shannon([1.0, 2.0, 3.0], [3.0, 1.0, 2.0]) == pytest.approx(0.0, abs=1e-15)


def test_scale_invariance_with_pre_unequal_post():
    """X → cX (c > 0) with post = ReLU(pre): ReLU(cX) = c·ReLU(X), so every metric, JS included, is unchanged;
    pre ≠ post, so JS is not trivially 0."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(400, 16, generator=g, dtype=torch.float64) @ torch.randn(
        16, 16, generator=g, dtype=torch.float64
    )
    a = layer_metrics(x, torch.relu(x), dtype=torch.float64)
    b = layer_metrics(7.5 * x, torch.relu(7.5 * x), dtype=torch.float64)
    assert a.js > 1e-3 and a.pr_gain != pytest.approx(1.0, abs=1e-3)
    for key in ("se_pre", "se_post", "pr_pre", "pr_post", "eee_pre", "eee_post", "js", "pr_gain"):
        assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-9, abs=1e-12), key


def test_identity_activation_control():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(400, 16, generator=g, dtype=torch.float64) @ torch.randn(
        16, 16, generator=g, dtype=torch.float64
    )
    a = layer_metrics(x, x.clone(), dtype=torch.float64)
    assert a.pr_gain == pytest.approx(1.0, abs=1e-6)
    assert a.js == pytest.approx(0.0, abs=1e-6)
    assert not a.reinjects


def test_rankme_and_return_on_width():
    rng = np.random.default_rng(8)
    pre = torch.from_numpy(rng.normal(size=(500, 6)) @ rng.normal(size=(6, 20)))
    m = layer_metrics(pre, torch.relu(pre), dtype=torch.float64, d_model=6)
    lam = np.clip(np.sort(np.linalg.eigvalsh(np.cov(torch.relu(pre).numpy().T)))[::-1], 1e-12, None)
    se, pr, _ = _naive(lam)
    assert rankme(lam) == pytest.approx(math.exp(se), rel=1e-9)
    assert m.rankme_post == pytest.approx(math.exp(se), rel=1e-6)
    assert m.pr_post_per_d == pytest.approx(pr / 20, rel=1e-6) and m.pr_pre_per_d == pytest.approx(
        m.pr_pre / 20
    )
    assert 1.0 <= m.rankme_pre <= 6 + 1e-6  # rank bound: rank(Σ_pre) ≤ d = 6
    assert rankme(np.ones(7)) == pytest.approx(7.0) and rankme([1.0, 0.0, 0.0]) == pytest.approx(1.0)


def test_relu_reinjects_on_low_rank_gaussian():
    """PreAct of rank 4 in D = 32: ReLU spreads the variance (SE↑, PR↑, EEE↓), as the paper's thesis says."""
    g = torch.Generator().manual_seed(5)
    pre = torch.randn(4000, 4, generator=g) @ torch.randn(4, 32, generator=g)
    m = layer_metrics(pre, torch.relu(pre))
    assert m.se_diff > 0 and m.pr_gain > 1 and m.eee_diff < 0 and m.reinjects
    assert m.pr_pre <= 4 + 1e-3  # the rank bound


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (torch.randn(10), "expected \\[N, D\\]"),
        (torch.randn(2, 3, 4), "expected \\[N, D\\]"),
        (torch.randn(1, 8), "N ≥ 2"),
        (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "NaN or Inf"),
    ],
)
def test_bad_input_to_eigenspectrum(bad, match):
    with pytest.raises(NerVEError, match=match) as exc:
        eigenspectrum(bad)
    assert "\n" not in str(exc.value)


def test_pre_post_from_different_tokens():
    with pytest.raises(NerVEError, match="same tokens"):
        layer_metrics(torch.randn(10, 4), torch.randn(11, 4))


def test_half_precision_is_accumulated_in_fp32():
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(6))
    e16 = eigenspectrum(x.to(torch.bfloat16))
    assert e16.dtype == torch.float32
    np.testing.assert_allclose(e16.numpy(), eigenspectrum(x.to(torch.bfloat16).float()).numpy(), rtol=1e-5)


def test_claim_statistics_match_scipy():
    """The Pearson r and tie-aware Spearman ρ behind C4 (numpy only) against scipy."""
    from scipy.stats import pearsonr, spearmanr

    from iclr26_nerve.stats import pearson as _corr
    from iclr26_nerve.stats import ranks as _ranks

    rng = np.random.default_rng(7)
    x = list(np.round(rng.normal(size=12), 1))  # rounding makes ties
    y = list(np.asarray(x) * 0.5 + rng.normal(size=12))
    assert _corr(x, y) == pytest.approx(pearsonr(x, y).statistic, rel=1e-10)
    assert _corr(_ranks(x), _ranks(y)) == pytest.approx(spearmanr(x, y).statistic, rel=1e-10)
    assert math.isnan(_corr([1.0, 2.0], [2.0, 1.0]))  # fewer than 3 points: no verdict material
