"""OBR on one matrix: each step against an explicit per-row solve, masks kept, levels, the claims' direction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_obr import baseline_compress, layer_output_error, obr_compress, synthetic_layer
from iclr26_obr.masks import check_nm_pattern
from iclr26_obr.obr import hessian_output_error


@pytest.fixture(scope="module")
def layer():
    return synthetic_layer(64, 24, 512, seed=3)


def _damped(H, percdamp=0.01):
    return H + percdamp * torch.diag(H).mean() * torch.eye(H.shape[0], dtype=H.dtype)


def test_step1_equals_explicit_row_solves(layer):
    """bits=None: OBR is step 1 only, w̄_R = w_R + H_RR⁻¹·H_RE·w_E per row (numpy.linalg.solve, row by row)."""
    c = obr_compress(layer.weight, layer.hessian, sparsity=0.5, bits=None)
    H = _damped(layer.hessian).numpy()
    W = layer.weight.numpy()
    keep = c.mask.numpy()
    for i in range(W.shape[0]):
        r, e = keep[i], ~keep[i]
        expect = W[i, r] + np.linalg.solve(H[np.ix_(r, r)], H[np.ix_(r, e)] @ W[i, e])
        np.testing.assert_allclose(c.weight[i, r].numpy(), expect, rtol=0, atol=1e-9)
    assert np.all(c.weight.numpy()[~keep] == 0)


def test_obr_rtn_steps_2_and_3_by_hand(layer):
    """OBR_RTN with scales of w̄: E2 = kept columns < α·C keep Q(w̄), R2 absorbs their error by a row solve."""
    bits, alpha = 4, 0.5
    c = obr_compress(layer.weight, layer.hessian, sparsity=0.5, bits=bits, quantizer="rtn", alpha=alpha)
    w_bar = obr_compress(layer.weight, layer.hessian, sparsity=0.5, bits=None).weight.numpy()
    H = _damped(layer.hessian).numpy()
    keep = c.mask.numpy()
    s = c.scales.numpy()
    C = w_bar.shape[1]
    split = int(alpha * C)
    for i in range(w_bar.shape[0]):
        q = lambda v, i=i: np.clip(np.round(v / s[i]), -8, 7) * s[i]  # noqa: E731
        e2 = keep[i] & (np.arange(C) < split)
        r2 = keep[i] & (np.arange(C) >= split)
        err = w_bar[i, e2] - q(w_bar[i, e2])
        w_t = w_bar[i].copy()
        w_t[r2] += np.linalg.solve(H[np.ix_(r2, r2)], H[np.ix_(r2, e2)] @ err)
        np.testing.assert_allclose(c.weight[i].numpy(), q(w_t) * keep[i], rtol=0, atol=1e-9)


@pytest.mark.parametrize("quantizer", ["gptq", "rtn"])
@pytest.mark.parametrize("nm", [None, "2:4"])
def test_mask_kept_levels_and_codes(layer, quantizer, nm):
    c = obr_compress(layer.weight, layer.hessian, nm=nm, bits=4, quantizer=quantizer)
    assert torch.all(c.weight[~c.mask] == 0)
    if nm:
        assert check_nm_pattern(c.mask, (2, 4))
    else:
        assert torch.all((~c.mask).sum(1) == 32)  # Wanda: exactly 50 % per row
    for row in c.weight:
        assert row.unique().numel() <= 16
    recon = c.codes.double() * c.scales.unsqueeze(1)
    assert float((recon - c.weight).abs().max()) < 1e-12
    assert torch.all(c.codes[~c.mask] == 0)


def test_obr_beats_the_baselines_on_held_out_data(layer):
    err = lambda c: layer_output_error(layer.weight, c.weight, layer.heldout, layout="LC")  # noqa: E731
    obr_g = err(obr_compress(layer.weight, layer.hessian, quantizer="gptq"))
    obr_r = err(obr_compress(layer.weight, layer.hessian, quantizer="rtn"))
    sgpt = err(baseline_compress(layer.weight, layer.hessian, "sparsegpt_gptq"))
    wanda = err(baseline_compress(layer.weight, layer.hessian, "wanda_rtn"))
    assert obr_g < sgpt < wanda and obr_r < sgpt
    rtn = err(baseline_compress(layer.weight, layer.hessian, "rtn"))
    assert (
        err(obr_compress(layer.weight, layer.hessian, sparsity=0.0, quantizer="rtn")) < rtn
    )  # C3's direction


@pytest.mark.parametrize("alpha", [0.1, 0.3, 0.77])
def test_any_alpha_and_the_count_split(layer, alpha):
    g = obr_compress(layer.weight, layer.hessian, alpha=alpha)
    r = obr_compress(layer.weight, layer.hessian, alpha=alpha, quantizer="rtn", e2_split="count")
    for c in (g, r):
        assert torch.all(c.weight[~c.mask] == 0) and torch.isfinite(c.weight).all()
    assert g.info["split"] == int(alpha * 64)


def test_rescale_final_and_given_mask(layer):
    keep = torch.rand(layer.weight.shape, generator=torch.Generator().manual_seed(0)) < 0.5
    c = obr_compress(layer.weight, layer.hessian, mask=keep, rescale_final=True, quantizer="rtn")
    assert torch.equal(c.mask, keep) and torch.all(c.weight[~keep] == 0)


@pytest.mark.parametrize(
    "method", ["rtn", "gptq", "wanda_rtn", "wanda_gptq", "sparsegpt_gptq", "sparsegpt_joint"]
)
def test_baselines_keep_their_masks(layer, method):
    c = baseline_compress(layer.weight, layer.hessian, method)
    assert torch.all(c.weight[~c.mask] == 0)
    expect = 0.0 if method in ("rtn", "gptq") else 0.5
    assert abs(c.sparsity - expect) < 1e-9
    for row in c.weight:
        assert row.unique().numel() <= 16


def test_output_error_two_ways(layer):
    """‖ΔW·X‖²/‖W·X‖² on the calibration tokens equals tr(ΔW·H·ΔWᵀ)/tr(W·H·Wᵀ) with H = 2XXᵀ/L."""
    c = baseline_compress(layer.weight, layer.hessian, "wanda_rtn")
    a = layer_output_error(layer.weight, c.weight, layer.calib, layout="LC")
    b = hessian_output_error(layer.weight, c.weight, layer.hessian)
    assert abs(a - b) < 1e-10 * max(a, 1)


def test_float32_and_transposed_inputs():
    L = synthetic_layer(32, 16, 256, seed=1, dtype=torch.float32)
    c = obr_compress(L.weight.t().contiguous().t(), L.hessian, nm=(2, 4))
    assert c.weight.dtype == torch.float32 and torch.isfinite(c.weight).all()


def test_dead_inputs_are_zeroed():
    L = synthetic_layer(32, 8, 256, seed=2)
    H = L.hessian.clone()
    H[5, :] = 0
    H[:, 5] = 0
    c = obr_compress(L.weight, H)
    assert torch.all(c.weight[:, 5] == 0) and torch.isfinite(c.weight).all()


def test_scales_come_from_the_dense_weight_by_default(layer):
    """The official code computes the per-row scales once from the dense W; ``compensated`` uses w̄."""
    from iclr26_obr.quantizer import find_scales

    dense = obr_compress(layer.weight, layer.hessian, quantizer="rtn")
    assert torch.allclose(dense.scales, find_scales(layer.weight, 4))
    comp = obr_compress(layer.weight, layer.hessian, quantizer="rtn", scales_from="compensated")
    w_bar = obr_compress(layer.weight, layer.hessian, bits=None).weight  # step 1 alone
    assert torch.allclose(comp.scales, find_scales(w_bar, 4))
    assert not torch.allclose(dense.scales, comp.scales)
    for c in (dense, comp):  # both stay on their grid: codes · scales reconstruct the weights
        assert float((c.codes.double() * c.scales.unsqueeze(1) - c.weight).abs().max()) < 1e-12


def test_layer_output_error_layouts(layer):
    """Both layouts give the same number; a square input is read as told, a wrong shape is one clear line."""
    c = baseline_compress(layer.weight, layer.hessian, "wanda_rtn")
    a = layer_output_error(layer.weight, c.weight, layer.heldout, layout="LC")
    b = layer_output_error(layer.weight, c.weight, layer.heldout.t(), layout="CL")
    assert abs(a - b) < 1e-12
    sq = layer.heldout[: layer.weight.shape[1]]  # L == Cin: the orientation matters and is explicit
    lc = layer_output_error(layer.weight, c.weight, sq, layout="LC")
    cl = layer_output_error(layer.weight, c.weight, sq.t(), layout="CL")
    assert abs(lc - cl) < 1e-12
    assert abs(lc - layer_output_error(layer.weight, c.weight, sq, layout="CL")) > 1e-6
    with pytest.raises(UserError, match="layout='CL' needs"):
        layer_output_error(layer.weight, c.weight, layer.heldout, layout="CL")
    with pytest.raises(UserError, match="layout must be"):
        layer_output_error(layer.weight, c.weight, layer.heldout, layout="rows")
