"""OPQ: the threshold τ(q, I), the outlier rate on Gaussian weights, exact restoration of outliers."""

from __future__ import annotations

import torch

from iclr26_bof4 import quantization_error, quantize
from iclr26_bof4.opq import block_std, tau


def test_tau_matches_monte_carlo_quantile_of_block_max():
    gen = torch.Generator().manual_seed(0)
    block_max = torch.randn(40000, 64, generator=gen).abs().max(dim=1).values
    mc = float(torch.quantile(block_max, 0.95))
    assert abs(tau(0.95, 64) - mc) / mc < 0.01
    assert abs(tau(0.95, 64) - 3.35) < 0.01


def test_tau_grows_with_block_size_and_q():
    assert tau(0.95, 32) < tau(0.95, 64) < tau(0.95, 256) < tau(0.95, 10**7)
    assert tau(0.9, 64) < tau(0.95, 64) < tau(0.99, 64)


def test_block_std_excludes_padding():
    blocks = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 7.0, 0.0, 0.0]])
    std = block_std(blocks, n_valid=6)
    assert torch.allclose(
        std, torch.tensor([torch.tensor([1.0, 2, 3, 4]).std(), torch.tensor([5.0, 7]).std()])
    )


def test_outlier_fraction_on_gaussian_weights():
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(2**20, generator=gen)
    frac = quantization_error(w, "bof4s-mse", block_size=64, opq_q=0.95)["outlier_fraction"]
    assert 0.0003 <= frac <= 0.0015


def test_outliers_restored_exactly():
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(64, 64, generator=gen) * 0.02
    planted = torch.tensor([5, 700, 2049, 4000])
    w.view(-1)[planted] = torch.tensor([0.9, -1.3, 0.55, 2.0])
    for dtype in (torch.float32, torch.bfloat16):
        wd = w.to(dtype)
        q = quantize(wd, "bof4s-mse", block_size=64, opq_q=0.95)
        assert set(planted.tolist()) <= set(q.outlier_idx.tolist())
        assert q.outlier_idx.dtype == torch.int64 and q.outlier_val.dtype == torch.bfloat16
        w_hat = q.dequantize()
        expected = wd.view(-1)[q.outlier_idx].to(torch.bfloat16).to(dtype)  # bfloat16 rounding only
        assert torch.equal(w_hat.view(-1)[q.outlier_idx], expected)
        # the planted outliers no longer stretch their blocks: the other weights of those blocks stay accurate
        blocks = planted // 64
        others = torch.ones(64, 64, dtype=torch.bool)
        others.view(-1)[q.outlier_idx] = False
        err = (w_hat.float() - wd.float()).abs()[blocks][others[blocks]]
        assert float(err.max()) < 0.01


def test_opq_lowers_error_on_contaminated_gaussian():
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(2**18, generator=gen)
    w = torch.where(torch.rand(2**18, generator=gen) < 0.002, w * 8, w)
    plain = quantization_error(w, "bof4s-mse", 64)
    opq = quantization_error(w, "bof4s-mse", 64, opq_q=0.95)
    assert opq["mse"] < 0.85 * plain["mse"]
    assert opq["bits_per_weight"] > plain["bits_per_weight"]  # outliers cost 80 bits each
