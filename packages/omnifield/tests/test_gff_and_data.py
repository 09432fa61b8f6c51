"""GFF, the sinusoid table, the Venn partition and the synthetic fields against independent numpy formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26_omnifield import GaussianFourierFeatures, sensor_partition, sinusoid_table, synthetic_fields


@pytest.mark.parametrize("two_pi", [True, False])
def test_gff_matches_numpy(two_pi):
    gff = GaussianFourierFeatures(2, 7, 3.0, two_pi=two_pi, seed=5)
    p = np.random.default_rng(0).random((4, 2))
    B = gff.B.double().numpy()
    c = 2 * math.pi if two_pi else 1.0
    want = np.concatenate([np.sin(c * p @ B), np.cos(c * p @ B)], axis=1)
    got = gff(torch.tensor(p, dtype=torch.float64).float()).double().numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert got.shape == (4, 14)


def test_gff_buffer_not_parameter_and_seeded(tmp_path):
    a, b = GaussianFourierFeatures(2, 8, 5.0, seed=3), GaussianFourierFeatures(2, 8, 5.0, seed=3)
    assert list(a.parameters()) == [] and "B" in dict(a.named_buffers())
    assert torch.equal(a.B, b.B)
    assert not torch.equal(a.B, GaussianFourierFeatures(2, 8, 5.0, seed=4).B)
    # sigma scales the standard deviation of B
    big = GaussianFourierFeatures(2, 4000, 5.0, seed=0).B
    assert abs(float(big.std()) - 5.0) < 0.15


def test_sinusoid_table_closed_form():
    n, d = 6, 10
    t = sinusoid_table(n, d).double().numpy()
    for p in range(n):
        for i in range(d // 2):
            assert t[p, 2 * i] == pytest.approx(math.sin(p / 10000 ** (2 * i / d)), abs=1e-6)
            assert t[p, 2 * i + 1] == pytest.approx(math.cos(p / 10000 ** (2 * i / d)), abs=1e-6)


@pytest.mark.parametrize(
    "P, f, c, tri, pair, excl, union",
    [(21600, 0.02, 432, 108, 81, 162, 837), (1024, 0.08, 80, 20, 15, 30, 155)],
)
def test_sensor_partition_counts(P, f, c, tri, pair, excl, union):
    part = sensor_partition(P, fraction=f, seed=123)
    assert all(len(part[m]) == c for m in "THW")
    assert len(part["triple"]) == tri
    assert [len(part[k]) for k in ("pair_TH", "pair_TW", "pair_HW")] == [pair] * 3
    assert [len(part[f"only_{m}"]) for m in "THW"] == [excl] * 3
    regions = [part[k] for k in part if k not in "THW"]
    allr = np.concatenate(regions)
    assert len(allr) == len(set(allr.tolist())) == union  # disjoint, union size
    assert len(set(part["T"]) | set(part["H"]) | set(part["W"])) == union
    # membership recomputed from the regions: T = triple ∪ pair_TH ∪ pair_TW ∪ only_T
    assert set(part["T"]) == set(part["triple"]) | set(part["pair_TH"]) | set(part["pair_TW"]) | set(
        part["only_T"]
    )
    again = sensor_partition(P, fraction=f, seed=123)
    assert all(np.array_equal(part[k], again[k]) for k in part)


def test_synthetic_fields_structure():
    d = synthetic_fields(3, grid=16, horizons=(0, 1, 2), seed=0)
    assert d.fields.shape == (3, 3, 3, 16, 16) and d.coords.shape == (256, 2)
    S = d.truth
    # T - S is the private field (variance 0.1 in expectation, 4 modes): small against Var S = 1
    assert np.var(d.fields[:, :, 0] - S) < 0.3 and 0.5 < np.var(S) < 1.5
    # H = tanh(1.5 S) + P_H: the residual is again only the private field
    assert np.var(d.fields[:, :, 1] - np.tanh(1.5 * S)) < 0.3
    # W = ∂S/∂x / std + P_W (the meridional wind; checked against an FFT derivative on a 32-grid below)
    assert abs(d.fields[:, :, 2].mean()) < 0.2
    speed = synthetic_fields(3, grid=16, horizons=(0, 1, 2), seed=0, wind="speed")
    assert np.array_equal(speed.fields[:, :, :2], d.fields[:, :, :2])  # T and H do not depend on W's kind
    # advection by v = (0.03, -0.02) per step: S(x, 1) = S(x - v, 0); check at the grid via the wave sum identity
    # (the grid does not contain x - v, so compare the spatial mean and variance, which advection preserves)
    np.testing.assert_allclose(S[:, 1].var(axis=(1, 2)), S[:, 0].var(axis=(1, 2)), rtol=0.1)
    assert np.array_equal(synthetic_fields(3, grid=16, seed=0).fields, d.fields)


@pytest.mark.parametrize(("k_low", "n_high"), [(4, 3), (2, 0)])
def test_synthetic_field_spectrum(k_low, n_high):
    """The shared latent's energy lies on the configured wave numbers (numpy FFT, an independent computation)."""
    d = synthetic_fields(2, grid=32, horizons=(0,), seed=1, k_low=k_low, n_high=n_high)
    power = np.abs(np.fft.fft2(d.truth[:, 0])) ** 2  # [n, g, g]
    k = np.fft.fftfreq(32, 1 / 32).astype(int)
    kinf = np.maximum(np.abs(k)[:, None], np.abs(k)[None, :])
    total = power.sum(axis=(1, 2))
    low = power[:, (kinf >= 1) & (kinf <= k_low)].sum(1)
    high = power[:, (kinf >= 6) & (kinf <= 10)].sum(1)
    np.testing.assert_allclose(low + high, total, rtol=1e-9)  # nothing at k = 0, 5 or above 10
    assert (high > 0).all() if n_high else (high < 1e-9 * total).all()


def test_meridional_wind_is_the_x_derivative_and_waves_per_sample():
    d = synthetic_fields(2, grid=32, horizons=(0,), seed=3)
    S = d.truth[:, 0]
    k = np.fft.fftfreq(32, 1 / 32)
    dSdx = np.real(np.fft.ifft2(np.fft.fft2(S) * (2j * np.pi * k)[None, :, None]))  # axis 1 is x
    W = d.fields[:, 0, 2]
    assert np.var(W - dSdx / dSdx.std()) < 0.3  # the rest is P_W (variance 0.1) and the normalisation
    assert np.corrcoef(W.ravel(), dSdx.ravel())[0, 1] > 0.9
    # fixed waves: every sample's energy lies on the same wave numbers; per-sample waves: not
    support = lambda x: np.abs(np.fft.fft2(x)) ** 2 > 1e-9 * (np.abs(np.fft.fft2(x)) ** 2).sum()  # noqa: E731
    assert np.array_equal(support(S[0]), support(S[1]))
    p = synthetic_fields(2, grid=32, horizons=(0,), seed=3, waves="per_sample").truth[:, 0]
    assert not np.array_equal(support(p[0]), support(p[1]))
    with pytest.raises(ValueError, match="waves"):
        synthetic_fields(1, grid=8, waves="random")
