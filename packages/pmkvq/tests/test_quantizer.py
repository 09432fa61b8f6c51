"""The quantiser and ERS against independent computations (exhaustive, float64 numpy, a per-group loop)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_pmkvq.quantizer import (
    equivalent_right_shift,
    naive_right_shift,
    pack,
    quantize_groups,
    resolve_group_size,
    unpack,
)


@pytest.mark.parametrize("b", [8, 4, 2, 1])
def test_ers_equals_rounded_division_exhaustively(b):
    codes = torch.arange(2 ** (2 * b))
    got = equivalent_right_shift(codes, b)
    # round(X / (2^b + 1)) with exact rational arithmetic (never a tie: 2X is even, (2k+1)(2^b+1) odd)
    want = [int(np.floor(x / (2**b + 1) + 0.5)) for x in range(2 ** (2 * b))]
    assert got.tolist() == want
    assert int(got.max()) == 2**b - 1


def test_ers_uses_int64_at_8_bit():
    # (2^16 - 2^8 + 1) * (65535 + 128) overflows int32; int32 input must still give the right answer
    codes = torch.tensor([65535, 65534, 32768], dtype=torch.int32)
    assert equivalent_right_shift(codes, 8).tolist() == [255, 255, 128]
    assert (65281 * (65535 + 128)) > 2**31


def _direct_float64(x: np.ndarray, bits: int) -> np.ndarray:
    lo, hi = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
    return np.clip(np.round((x - lo) / ((hi - lo) / (2**bits - 1))), 0, 2**bits - 1)


def test_chain_codes_equal_direct_float64_quantisation():
    x = torch.randn(3000, 64, generator=torch.Generator().manual_seed(1))
    q = quantize_groups(x, 16, 64)
    for b in (8, 4, 2):
        q = q.shrink()
        assert q.bits == b
        assert np.array_equal(q.codes.numpy(), _direct_float64(x.double().numpy(), b))


def test_naive_shift_is_worse_than_ers():
    x = torch.randn(2000, 32, generator=torch.Generator().manual_seed(2))
    q4 = quantize_groups(x, 4, 32)
    ers = q4.shrink().dequantize()
    naive = naive_right_shift(q4.codes, 2).float().unflatten(-1, (-1, 32)) * (q4.scale * 4).unsqueeze(-1)
    naive = naive.flatten(-2) - q4.zero.float().repeat_interleave(32, -1)
    assert (naive - x).square().mean() > 1.5 * (ers - x).square().mean()


def test_quantize_groups_matches_a_per_group_loop():
    x = torch.randn(2, 3, 5, 24, generator=torch.Generator().manual_seed(3)) * 3
    x[0, 0, 0, :8] = 1.25  # a constant group
    q = quantize_groups(x, 4, 8)
    codes, scale, zero, deq = q.codes, q.scale, q.zero, q.dequantize()
    flat = x.reshape(-1, 24)
    for r in range(flat.shape[0]):
        for gi in range(3):
            grp = [float(v) for v in flat[r, gi * 8 : (gi + 1) * 8]]
            lo, hi = min(grp), max(grp)
            s = (hi - lo) / 15 if hi > lo else 1.0
            want = [min(max(round((v - lo) / s), 0), 15) for v in grp]
            idx = np.unravel_index(r, (2, 3, 5))
            assert codes[idx][gi * 8 : (gi + 1) * 8].tolist() == want
            s_stored = scale[idx][gi].item()
            if hi > lo:
                assert s_stored == pytest.approx(s, rel=1e-3)  # float16 range
            assert zero[idx][gi].item() == pytest.approx(-lo, rel=1e-3, abs=1e-3)
            back = [c * s_stored - zero[idx][gi].item() for c in want]
            assert deq[idx][gi * 8 : (gi + 1) * 8].tolist() == pytest.approx(back, rel=1e-5, abs=1e-5)
    # the constant group: codes 0, dequantises to its value
    assert codes[0, 0, 0, :8].tolist() == [0] * 8
    assert deq[0, 0, 0, :8].tolist() == pytest.approx([1.25] * 8, abs=1e-3)


@pytest.mark.parametrize("bits", [16, 8, 4, 2, 1])
def test_pack_unpack_roundtrip_and_bytes(bits):
    codes = torch.randint(0, 2**bits, (3, 4, 12))
    words = pack(codes, bits)
    assert torch.equal(unpack(words, bits, 12), codes)
    want_bytes = 3 * 4 * (12 * 2 if bits == 16 else -(-12 // (8 // bits)))
    assert words.numel() * words.element_size() == want_bytes
    q = quantize_groups(torch.randn(3, 4, 12), bits, 12)
    assert q.nbytes == want_bytes + 3 * 4 * 2 * 2  # + float16 range and zero per group


def test_bad_bits_and_group_size_are_user_errors():
    with pytest.raises(UserError, match="bits must be one of"):
        quantize_groups(torch.randn(2, 8), 3, 8)
    with pytest.raises(UserError, match="divisor of head_dim 12"):
        resolve_group_size(12, 5)
    assert resolve_group_size(256) == 128 and resolve_group_size(64) == 64
