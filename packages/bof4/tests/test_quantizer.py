"""The quantiser against naive references: brute-force nearest level, packing, padding, dtypes, signed absmax."""

from __future__ import annotations

import pytest
import torch

from iclr26_bof4 import codebook, dequantize, quantization_error, quantize
from iclr26_bof4.quantizer import nearest_level, pack_codes, unpack_codes


def brute_force_codes(x: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """argmin_ℓ |x − x̂_ℓ| in float64, ties to the upper level (last minimum)."""
    dist = (x.double().reshape(-1, 1) - levels.double().reshape(1, -1)).abs()
    last_min = dist.flip(1).argmin(dim=1)  # torch.argmin returns the first minimum
    return (levels.numel() - 1 - last_min).reshape(x.shape)


def _exact_ties(levels: torch.Tensor) -> torch.Tensor:
    """Midpoints of adjacent levels that are exactly representable in float32 (true ties)."""
    lv = levels.double()
    mids = (lv[:-1] + lv[1:]) / 2
    return mids[mids.float().double() == mids].float()


@pytest.mark.parametrize("name", ["nf4", "af4", "bof4-mse", "bof4s-mse", "bof4s-mae", "dyadic"])
def test_nearest_level_matches_brute_force_with_ties(name):
    if name == "dyadic":  # levels k/64: every midpoint is an exact float32 tie
        levels = torch.tensor([-64, -50, -40, -31, -23, -15, -7, 0, 6, 13, 21, 29, 38, 48, 57, 64]) / 64.0
    else:
        levels = codebook(name)
    gen = torch.Generator().manual_seed(1)
    ties = _exact_ties(levels)
    if name == "dyadic":
        assert ties.numel() == 15
    x = torch.cat(
        [torch.rand(20000, generator=gen) * 2.4 - 1.2, ties, ties, levels, levels.nextafter(levels + 1)]
    )
    got = nearest_level(x, levels).long()
    assert torch.equal(got, brute_force_codes(x, levels))
    # every true tie goes to the upper level
    if ties.numel():
        upper = torch.searchsorted(levels.double(), ties.double())
        assert torch.equal(nearest_level(ties, levels).long(), upper)


def test_pack_unpack_round_trip_and_layout():
    gen = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (1001,), generator=gen, dtype=torch.uint8)
    packed = pack_codes(codes)
    assert packed.dtype == torch.uint8 and packed.numel() == 501
    assert torch.equal(unpack_codes(packed, 1001), codes)
    # layout: element 2k in the high nibble, 2k+1 in the low nibble
    assert pack_codes(torch.tensor([1, 2, 15, 0, 7], dtype=torch.uint8)).tolist() == [0x12, 0xF0, 0x70]


def _reference_scales(w: torch.Tensor, block: int, signed: bool) -> torch.Tensor:
    flat = w.reshape(-1).float()
    out = []
    for start in range(0, flat.numel(), block):
        chunk = flat[start : start + block]
        top = chunk[chunk.abs() == chunk.abs().max()]  # ties between +a and −a: +a
        m = float(top.max()) if signed else float(top.abs().max())
        out.append(m if m != 0 else 1.0)
    return torch.tensor(out, dtype=torch.float32)


@pytest.mark.parametrize("name", ["nf4", "bof4s-mse"])
def test_quantize_codes_match_brute_force(name):
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(37, 29, generator=gen) * 0.02  # 1073 weights: last block padded
    q = quantize(w, name, block_size=64)
    scales = _reference_scales(w, 64, signed=name.startswith("bof4s")).half().float()
    assert torch.equal(q.scales.float(), scales)
    flat = torch.zeros(q.n_blocks * 64)
    flat[: w.numel()] = w.reshape(-1)
    x = flat.reshape(-1, 64) / scales[:, None]
    expected = brute_force_codes(x, codebook(name))
    assert torch.equal(q.unpacked_codes().long(), expected)


def test_numel_not_divisible_by_block_size():
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(7, 13, generator=gen)  # 91 weights, I = 64: one full block, one with 37 real weights
    w[6, 12] = 0.001  # the last real weight is tiny; padding zeros must not shift any scale
    q = quantize(w, "nf4", block_size=64)
    assert q.n_blocks == 2 and q.codes.numel() == 64
    w_hat = q.dequantize()
    assert w_hat.shape == w.shape
    assert float(q.scales[1]) == pytest.approx(float(w.reshape(-1)[64:].abs().max()), rel=1e-3)
    err = quantization_error(w, "nf4", block_size=64)
    assert err["mse"] == pytest.approx(float((w_hat.double() - w.double()).square().mean()), rel=1e-12)
    assert err["mae"] == pytest.approx(float((w_hat.double() - w.double()).abs().mean()), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dtype_and_shape_preserved(dtype):
    gen = torch.Generator().manual_seed(4)
    w = (torch.randn(3, 5, 17, generator=gen) * 0.05).to(dtype)
    q = quantize(w, "bof4s-mse", block_size=32, opq_q=0.9)
    w_hat = dequantize(q)
    assert w_hat.dtype == dtype and w_hat.shape == w.shape
    assert float((w_hat.float() - w.float()).abs().max()) < 0.05  # a coarse sanity bound


def test_signed_absmax_maps_max_magnitude_to_top_level():
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(16, 64, generator=gen)
    j = w.abs().argmax(dim=1)
    w[::2, :] *= -1  # every other block: the max-magnitude weight is negative in some blocks
    q = quantize(w, "bof4s-mse", block_size=64)
    codes = q.unpacked_codes().long()
    rows = torch.arange(16)
    assert bool((codes[rows, j] == 15).all())
    w_max = w[rows, j]
    assert torch.equal(q.scales, w_max.half())  # signed scale, stored in float16
    assert torch.equal(q.dequantize()[rows, j], w_max.half().float())  # reconstructed up to the scale dtype
    # unsigned absmax: a negative max lands on level −1 (index 0)
    qu = quantize(w, "bof4-mse", block_size=64)
    neg = w_max < 0
    assert bool((qu.unpacked_codes().long()[rows[neg], j[neg]] == 0).all())


def test_signed_absmax_tie_keeps_the_positive_maximum_exact():
    # +a and −a tie for the largest magnitude: the scale is +a whatever their order, so +a is reconstructed
    # exactly and −a → x = −1 takes the lowest level (−0.85685 for BOF4-S(MSE)) like any other value
    levels = codebook("bof4s-mse")
    rest = torch.linspace(-0.5, 0.5, 62)
    for block in (torch.cat([torch.tensor([-1.0, 1.0]), rest]), torch.cat([torch.tensor([1.0, -1.0]), rest])):
        for perm in (torch.arange(64), torch.randperm(64, generator=torch.Generator().manual_seed(9))):
            w = block[perm]
            q = quantize(w, "bof4s-mse", block_size=64)
            w_hat = q.dequantize()
            assert float(q.scales[0]) == 1.0
            assert float(w_hat[w == 1.0]) == 1.0
            assert float(w_hat[w == -1.0]) == pytest.approx(float(levels[0]))
    # with a strictly larger negative weight the scale is that weight and it is exact
    w = torch.cat([torch.tensor([-1.5, 1.0]), rest])
    assert float(quantize(w, "bof4s-mse", block_size=64).dequantize()[0]) == -1.5


def test_all_zero_block_and_zero_levels():
    w = torch.zeros(3, 64)
    w[1] = torch.linspace(-1, 1, 64)
    q = quantize(w, "bof4s-mse", block_size=64)
    assert q.scales.tolist()[0] == 1.0 and q.scales.tolist()[2] == 1.0
    assert torch.equal(q.dequantize()[0], torch.zeros(64))


def test_error_identity_mse_is_weighted_normalised_mse():
    # MSE(W) = (1/B) Σ_b m_b² · MSE(X_b) with X_b = W_b / m_b, x̂ the levels of the codes
    gen = torch.Generator().manual_seed(6)
    w = torch.randn(256, 64, generator=gen) * torch.rand(256, 1, generator=gen)  # blocks with varied scales
    for name in ("nf4", "bof4s-mse"):
        q = quantize(w, name, block_size=64)
        m = q.scales.double()
        x = w.double() / m[:, None]
        x_hat = codebook(name).double()[q.unpacked_codes().long()]
        rhs = float((m.square() * (x - x_hat).square().mean(dim=1)).mean())
        lhs = quantization_error(w, name, block_size=64)["mse"]
        assert lhs == pytest.approx(rhs, rel=1e-5)


def test_scale_dtype_policy_and_bits():
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(128, 64, generator=gen)
    q = quantize(w, block_size=64)
    assert q.scales.dtype == torch.float16
    assert q.bits_per_weight == pytest.approx(4.25)
    assert q.nbytes == 128 * 64 // 2 + 128 * 2
    big = quantize(w * 1e6, block_size=64)  # |m_b| > 65504 would overflow float16
    assert big.scales.dtype == torch.float32
    rel = float((big.dequantize().double() - w.double() * 1e6).square().mean() / 1e12)
    assert rel == pytest.approx(float((q.dequantize().double() - w.double()).square().mean()), rel=0.02)
    tiny = quantize(w * 1e-7, block_size=64)  # float16 would flush these scales to subnormals/zero
    assert tiny.scales.dtype == torch.float32 and bool(torch.isfinite(tiny.dequantize()).all())


def test_raw_codebook_signedness():
    nf4 = codebook("nf4")
    assert quantize(torch.randn(64), nf4).signed is False  # contains −1 → unsigned absmax
    signed_levels = codebook("bof4s-mse")
    q = quantize(torch.randn(64), signed_levels)
    assert q.signed is True and q.codebook_name is None
