"""Issue #46: the best-key diagnostic, the oracle-angle path and `derain`'s automatic tiling."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from iclr26_delivr import DeLiVR, DeLiVRConfig
from iclr26_delivr.derain import auto_tile, derain
from iclr26_delivr.keys import band_pairs, best_key_change, claim_d1, diagnostic

TINY = dict(embed_dim=16, depth=1, heads=2, patch=8, ffn_ratio=2.0, num_cab=1, layerscale_init=0.5)


def _naive_best_key_change(h: int, w: int, deg: float) -> float:
    """Independent: scipy's rotation about z, rays built by hand, nearest ray by a Python loop."""
    rot = Rotation.from_rotvec([0.0, 0.0, math.radians(deg)]).as_matrix()
    cells = [(x, y) for y in range(h) for x in range(w)]
    rays = []
    for x, y in cells:
        v = np.array([(x - (w - 1) / 2) / (w - 1), (y - (h - 1) / 2) / (h - 1), 1.0])
        rays.append(v / np.linalg.norm(v))
    moved = 0
    for i, p in enumerate(rays):
        best = max(range(len(rays)), key=lambda j: float(p @ rot @ rays[j]))
        moved += best != i
    return moved / len(rays)


@pytest.mark.parametrize(("grid", "deg"), [((6, 6), 8.0), ((8, 8), 8.0), ((12, 12), 3.0), ((5, 7), -6.0)])
def test_best_key_change_against_a_naive_loop(grid, deg):
    assert best_key_change(grid, [deg]) == pytest.approx(_naive_best_key_change(*grid, deg))


def test_best_key_numbers_of_the_review_and_no_change_without_rotation():
    # issue #46: 6×6 grid (48 px, p = 8) at 8°: 0 %; 8×8 (64 px): 31 %; 32×32 (256 crop): 66 % at 3°, 95 % at 8°
    assert best_key_change((6, 6), [8.0]) == 0.0
    assert best_key_change((8, 8), [8.0]) == pytest.approx(0.3125)
    assert best_key_change((32, 32), [3.0]) == pytest.approx(0.66, abs=0.01)
    assert best_key_change((32, 32), [8.0]) == pytest.approx(0.95, abs=0.01)
    assert best_key_change((12, 12), [0.0, 0.0]) == 0.0


def test_band_pairs_and_the_check_row():
    phi = torch.tensor([[0.0, 1.0, 3.0, 6.0, 10.0]], dtype=torch.float64)
    assert sorted(band_pairs(phi, 1).tolist()) == [1.0, 2.0, 3.0, 4.0]
    assert sorted(band_pairs(phi, 2).tolist()) == [1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 7.0]
    phi = torch.tensor([[-8.0, -4.0, 0.0, 4.0, 8.0]] * 2, dtype=torch.float64)
    coarse, fine = diagnostic(phi, 48, 8, 1, 8.0), diagnostic(phi, 48, 4, 1, 8.0)
    assert coarse["rows"]["this run"]["clip_pairs"] == 0.0 and not claim_d1(coarse).holds
    share = best_key_change((12, 12), [4.0])
    assert fine["rows"]["this run"]["clip_pairs"] == pytest.approx(share) and claim_d1(fine).holds == (
        share >= 0.05
    )


def _model(seed: int = 0, **kw) -> DeLiVR:
    torch.manual_seed(seed)
    return DeLiVR(DeLiVRConfig(**{**TINY, **kw})).eval()


@torch.no_grad()
def test_oracle_angles_replace_the_head_and_only_relative_angles_matter():
    m = _model(patch=4)
    x = torch.rand(2, 5, 3, 24, 24)
    angles = torch.deg2rad(torch.tensor([[-6.0, -3.0, 0.0, 3.0, 6.0], [2.0, 0.0, -2.0, -4.0, -6.0]]))
    out = m(x, angles=angles)
    assert torch.equal(out.theta, angles) and torch.allclose(
        out.velocity, angles.diff(dim=1).abs(), atol=1e-6
    )
    assert not torch.allclose(out.restored, m(x).restored, atol=1e-7)  # the rotations reach the output
    # the relative bias: a common offset of every frame's angle changes nothing (C1 through the whole net)
    assert torch.allclose(m(x, angles=angles + 0.3).restored, out.restored, atol=1e-5)
    # the ablation (spatial, temporal bias and decay off) ignores the angles
    abl = _model(patch=4, spatial_bias=False, temporal_bias=False, decay=False)
    assert torch.allclose(abl(x, angles=angles).restored, abl(x).restored, atol=1e-7)


@torch.no_grad()
def test_derain_passes_each_windows_angles():
    m = _model()
    video = torch.rand(4, 3, 16, 16)
    angles = torch.deg2rad(torch.tensor([0.0, 5.0, -5.0, 10.0]))
    got = derain(m, video, angles=angles)
    windows = torch.tensor([[0, 0, 0, 1, 2], [0, 0, 1, 2, 3], [0, 1, 2, 3, 3], [1, 2, 3, 3, 3]])
    want = m(video[windows], angles=angles[windows]).restored.clamp(0, 1)
    assert torch.allclose(got, want, atol=1e-6)
    with pytest.raises(ValueError, match=r"angles must be \[F\]"):
        derain(m, video, angles=angles[:2])


@torch.no_grad()
def test_derain_tiles_itself_when_memory_is_short_and_a_given_tile_wins():
    m = _model()
    video = torch.rand(2, 3, 40, 40)
    need = m.memory_estimate(40, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        untiled = derain(m, video, overlap=8, memory=4 * need)  # fits: no warning, no tiling
    assert torch.equal(untiled, derain(m, video, tile=64, overlap=8, memory=1))
    tile = auto_tile(m, 40, 40, 1, 8, need)  # half of 2·need = need: the full frame fits exactly
    assert tile is None
    tile = auto_tile(m, 40, 40, 1, 8, need - 1)
    assert tile is not None and tile % 8 == 0 and 8 < tile < 40
    assert m.memory_estimate(tile, tile) <= need - 1 < m.memory_estimate(tile + 8, tile + 8)
    with pytest.warns(UserWarning, match=f"tiling with tile={tile}, overlap=8"):
        auto = derain(m, video, overlap=8, memory=2 * (need - 1))
    assert torch.equal(auto, derain(m, video, tile=tile, overlap=8))
    # the user's tile wins, whatever the memory
    assert torch.equal(derain(m, video, tile=16, overlap=8, memory=1), derain(m, video, tile=16, overlap=8))
    # not even the smallest tile fits: one line, nothing computed
    with pytest.raises(ValueError, match="even a 16x16 tile") as err:
        derain(m, video, overlap=8, memory=2 * m.memory_estimate(8, 8))
    assert "\n" not in str(err.value)


def test_a_720p_frame_with_the_paper_network_is_tiled_not_asked_for_hundreds_of_gib():
    class Paper:  # memory_estimate needs only the config: skip building the paper's 12 blocks
        config = DeLiVRConfig()  # C = 128, p = 8, T = 5
        memory_estimate = DeLiVR.memory_estimate

    m = Paper()
    assert m.memory_estimate(720, 1280) > 300 * 2**30  # the review: ≈ 386 GiB per block untiled
    tile = auto_tile(m, 720, 1280, 1, 32, 8 * 2**30)
    assert tile is not None and m.memory_estimate(tile, tile) <= 8 * 2**30


@pytest.mark.parametrize("hidden", [1, 4, 16])
def test_piecewise_g_equals_the_mlp_form_values_and_gradients(hidden):
    from iclr26_delivr.piecewise import scalar_mlp

    torch.manual_seed(hidden)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(1, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 3)
    ).double()
    with torch.no_grad():
        mlp[0].weight[0] = 0.0  # a constant unit (no kink) must be handled too
    bias = (torch.randn(2, 9, 9, dtype=torch.float64) * 3).requires_grad_()
    bias_ref = bias.detach().clone().requires_grad_()
    want = mlp(bias_ref.unsqueeze(-1)).permute(0, 3, 1, 2)
    got = scalar_mlp(bias, mlp[0], mlp[2])
    assert got.shape == (2, 3, 9, 9) and torch.allclose(got, want, atol=1e-12)
    weight = torch.randn_like(want)
    params = list(mlp.parameters())
    g_want = torch.autograd.grad((want * weight).sum(), [bias_ref, *params])
    g_got = torch.autograd.grad((got * weight).sum(), [bias, *params])
    for a, b in zip(g_got, g_want, strict=True):
        assert torch.allclose(a, b, atol=1e-10)
    # the official mask order writes −1e4 before g: far outside every kink, still the same function
    far = torch.full((1, 2, 2), -1e4, dtype=torch.float64)
    assert torch.allclose(scalar_mlp(far, mlp[0], mlp[2]), mlp(far.unsqueeze(-1)).permute(0, 3, 1, 2))
