"""The DeLiVR network: shapes, save/load, initialisation, masking, the angle convention, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26_delivr import DeLiVR, DeLiVRConfig
from iclr26_delivr.analysis import masked_attention_mass
from iclr26_delivr.bias import lie_bias
from iclr26_delivr.data import frame_coordinates
from iclr26_delivr.experiment import ORACLE_SIGN
from iclr26_delivr.lie import so2_matrix

TINY = dict(embed_dim=16, depth=2, heads=2, patch=8, ffn_ratio=2.0, num_cab=1)


def _model(seed: int = 0, **kw) -> DeLiVR:
    torch.manual_seed(seed)
    return DeLiVR(DeLiVRConfig(**{**TINY, **kw}))


def test_forward_backward_odd_size_is_padded_and_cropped():
    m = _model()
    x = torch.rand(2, 5, 3, 40, 56)
    out = m(x)
    assert out.restored.shape == (2, 3, 40, 56)
    assert out.theta.shape == (2, 5) and out.omega.shape == (2, 5, 3) and out.velocity.shape == (2, 4)
    out.restored.square().mean().backward()
    grads = [p.grad for p in m.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert m.so3_head.net[-1].weight.grad.abs().sum() > 0  # the angle head learns through the spatial bias


def test_zero_initialised_head_gives_identity_rotations():
    m = _model().eval()
    out = m(torch.rand(1, 3, 3, 16, 16))
    assert torch.all(out.theta == 0) and torch.all(out.omega == 0) and torch.all(out.velocity == 0)
    assert float(m.tau.detach()) == pytest.approx(2.0)


def test_output_is_centre_frame_plus_scaled_residual():
    m = _model()
    with torch.no_grad():
        m.res_scale.zero_()
    x = torch.rand(1, 5, 3, 16, 24)
    assert torch.allclose(m(x).restored, x[:, 2])


def test_all_frames_head_matches_centre_only_head():
    m = _model(return_all_frames=True).eval()
    c = _model(return_all_frames=False).eval()
    x = torch.rand(1, 3, 3, 16, 16)
    a, b = m(x), c(x)
    assert a.all_frames.shape == (1, 3, 3, 16, 16)
    assert torch.allclose(a.restored, b.restored, atol=1e-6)


def test_save_pretrained_round_trip(tmp_path):
    m = _model(rotation="so3", bias_form="to_base").eval()
    with torch.no_grad():  # move the angle head off zero so the rotations matter
        m.so3_head.net[-1].weight.normal_(0, 0.1)
    x = torch.rand(1, 5, 3, 24, 24)
    m.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    back = DeLiVR.from_pretrained(tmp_path).eval()
    assert back.config.rotation == "so3" and back.config.bias_form == "to_base"
    assert torch.equal(m(x).restored, back(x).restored)


def test_band_mask_after_mlp_is_exact_and_official_order_leaks():
    x = torch.rand(1, 5, 3, 16, 16)
    ours = _model(seed=1, mask_after_mlp=True)
    official = _model(seed=1, mask_after_mlp=False)
    with torch.no_grad():  # an MLP whose linear extrapolation to −1e4 is large and positive for one head
        for m in (ours, official):
            for blk in m.blocks:
                mlp = blk.attn.nonlinear_bias.mlp
                mlp[0].weight.fill_(-1.0)
                mlp[0].bias.zero_()
                mlp[2].weight.fill_(1e-3)
    assert masked_attention_mass(ours, x)["max"] == 0.0
    leak = masked_attention_mass(official, x)
    assert leak["mean"] > 0.5  # g(−1e4) = +10 per head: masked frames dominate
    # and with SDPA (the fast path) the masked-after-MLP outputs equal the explicit softmax
    ours.eval()
    assert torch.allclose(ours(x).restored, ours(x, output_attentions=True).restored, atol=1e-6)


def _corresponding_tokens(phi_deg: np.ndarray, size: int, patch: int):
    """Token pairs ((c, i), (s, j)) that see the same scene point, from the data generator's sampling grid."""
    t = len(phi_deg)
    c = (t - 1) // 2
    centre = np.array([200.0, 200.0])
    xs, ys = frame_coordinates(np.repeat(centre[None], t, 0), phi_deg, size)  # [T, S, S]
    g = size // patch
    pairs = []
    for s in range(t):
        if s == c:
            continue
        src = np.stack([xs[s].ravel(), ys[s].ravel()], 1)
        for gy in range(g):
            for gx in range(g):
                r, col = gy * patch + patch // 2, gx * patch + patch // 2
                q = np.array([xs[c, r, col], ys[c, r, col]])
                k = int(np.argmin(((src - q) ** 2).sum(1)))
                rr, cc = divmod(k, size)
                pairs.append((c * g * g + gy * g + gx, s * g * g + (rr // patch) * g + cc // patch))
    return pairs


def test_angle_convention_fixes_the_oracle_sign():
    """θ_t = ORACLE_SIGN·φ_t (φ: the generator's CCW-as-displayed rotation) maximises the bias at corresponding
    tokens; the opposite sign gives less. This fixes the sign used by claim C5."""
    phi = np.array([-20.0, -10.0, 0.0, 10.0, 20.0])
    size, patch = 64, 8
    pairs = _corresponding_tokens(phi, size, patch)
    rows, cols = zip(*pairs, strict=True)

    def mean_bias(sign: float) -> float:
        rot = so2_matrix(torch.tensor(sign * np.deg2rad(phi))[None])
        b = lie_bias(rot, (size // patch, size // patch), temporal=False, decay=False).bias[0]
        return float(b[list(rows), list(cols)].mean())

    right, wrong = mean_bias(ORACLE_SIGN), mean_bias(-ORACLE_SIGN)
    assert right > wrong + 1e-3, (right, wrong)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((1, 4, 3, 16, 16), "frames must be odd"),
        ((1, 5, 1, 16, 16), "3 channels"),
        ((5, 3, 16, 16), "[B, T, 3"),
    ],
)
def test_bad_frames_one_clear_error(shape, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        _model()(torch.rand(*shape))


def test_nan_frames_and_bad_config():
    x = torch.rand(1, 3, 3, 16, 16)
    x[0, 1, 0, 2, 2] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        _model()(x)
    with pytest.raises(ValueError, match="theta_max_deg must be in"):
        DeLiVRConfig(theta_max_deg=180)
    with pytest.raises(ValueError, match="frames must be odd"):
        DeLiVRConfig(frames=4)
    with pytest.raises(ValueError, match="divisible"):
        DeLiVRConfig(embed_dim=30, heads=4)
