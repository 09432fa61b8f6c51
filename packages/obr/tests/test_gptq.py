"""GPTQ and SparseGPT against naive references that recompute H⁻¹ on the remaining columns at every step."""

from __future__ import annotations

import torch

from iclr26_obr.gptq import gptq_quantize
from iclr26_obr.quantizer import find_scales, quantize
from iclr26_obr.sparsegpt import sparsegpt_prune


def _naive_gptq(W, H, scales, bits, mask=None):
    """Optimal Brain Quantisation column by column: quantise column j, then move the remaining columns F by
    −(w_j − q_j)/[H_F⁻¹]_00 · [H_F⁻¹]_0,: with H_F⁻¹ the inverse of H restricted to F = {j, …} (recomputed)."""
    W = W.clone()
    C = W.shape[1]
    for j in range(C):
        Hinv = torch.linalg.inv(H[j:, j:])
        q = quantize(W[:, j], scales, bits)
        if mask is not None:
            q = q * mask[:, j]
        err = (W[:, j] - q) / Hinv[0, 0]
        W[:, j:] -= err.unsqueeze(1) * Hinv[0].unsqueeze(0)
        W[:, j] = q
    return W


def _damped(random_spd, c, seed):
    H = random_spd(c, seed)
    return H + 0.01 * torch.diag(H).mean() * torch.eye(c, dtype=H.dtype)


def test_gptq_equals_naive_obq(random_spd):
    g = torch.Generator().manual_seed(0)
    for seed, c in ((0, 16), (1, 12), (2, 9)):
        H = _damped(random_spd, c, seed)
        W = torch.randn(10, c, generator=g, dtype=torch.float64)
        s = find_scales(W, 4)
        fast = gptq_quantize(W, H, s, 4, blocksize=5)  # lazy blocks that do not divide C
        slow = _naive_gptq(W, H, s, 4)
        assert (fast - slow).abs().max() < 1e-9 or (fast != slow).float().mean() < 0.02  # rounding ties only


def test_masked_gptq_equals_naive_and_keeps_zeros(random_spd):
    g = torch.Generator().manual_seed(1)
    H = _damped(random_spd, 16, 4)
    W = torch.randn(12, 16, generator=g, dtype=torch.float64)
    mask = torch.rand(12, 16, generator=g) < 0.5
    s = find_scales(W * mask, 4)
    fast = gptq_quantize(W * mask, H, s, 4, mask=mask, blocksize=4)
    slow = _naive_gptq(W * mask, H, s, 4, mask=mask.double())
    assert torch.all(fast[~mask] == 0)
    assert (fast != slow).float().mean() < 0.02 and (fast - slow).abs().max() < 1e-9 + 2 * float(s.max())


def test_gptq_beats_rtn_on_its_objective(random_spd):
    g = torch.Generator().manual_seed(2)
    H = _damped(random_spd, 32, 5)
    W = torch.randn(16, 32, generator=g, dtype=torch.float64)
    s = find_scales(W, 3)
    obj = lambda Q: float((((W - Q) @ H) * (W - Q)).sum())  # noqa: E731
    assert obj(gptq_quantize(W, H, s, 3)) < 0.8 * obj(quantize(W, s, 3))


def _naive_sparsegpt_nm(W, H, n, m):
    """SparseGPT 2:4 without lazy blocks: at each group start choose the M−N lowest w²/[H_F⁻¹]_00-style saliencies
    (from U's diagonal), prune, propagate like OBQ."""
    W = W.clone()
    C = W.shape[1]
    U = torch.linalg.cholesky(torch.linalg.inv(H), upper=True)
    pruned = torch.zeros_like(W, dtype=torch.bool)
    for j in range(C):
        if j % m == 0:
            sal = W[:, j : j + m] ** 2 / torch.diag(U)[j : j + m] ** 2
            low = torch.sort(sal, dim=1, stable=True).indices[:, : m - n]
            pruned[:, j : j + m].scatter_(1, low, True)
        Hinv = torch.linalg.inv(H[j:, j:])
        q = torch.where(pruned[:, j], 0.0, W[:, j])
        err = (W[:, j] - q) / Hinv[0, 0]
        W[:, j:] -= err.unsqueeze(1) * Hinv[0].unsqueeze(0)
        W[:, j] = q
    return W, ~pruned


def test_sparsegpt_nm_equals_naive(random_spd):
    g = torch.Generator().manual_seed(3)
    H = _damped(random_spd, 16, 6)
    W = torch.randn(8, 16, generator=g, dtype=torch.float64)
    fast, keep = sparsegpt_prune(W, H, nm=(2, 4), blocksize=8)
    slow, keep_ref = _naive_sparsegpt_nm(W, H, 2, 4)
    assert torch.equal(keep, keep_ref)
    assert float((fast - slow).abs().max()) < 1e-9
    assert bool((keep.reshape(8, 4, 4).sum(-1) == 2).all())


def test_sparsegpt_unstructured_prunes_the_block_fraction(random_spd):
    H = _damped(random_spd, 32, 7)
    W = torch.randn(16, 32, dtype=torch.float64)
    out, keep = sparsegpt_prune(W, H, 0.5, blocksize=16)
    assert int((~keep).sum()) == 16 * 32 // 2
    assert torch.all(out[~keep] == 0)
    naive = W * keep
    obj = lambda Q: float((((W - Q) @ H) * (W - Q)).sum())  # noqa: E731
    assert obj(out) < obj(naive)  # the OBS updates help
