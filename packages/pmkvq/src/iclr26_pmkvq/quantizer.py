"""Group-wise asymmetric integer quantisation and the equivalent right shift (ERS) of PM-KVQ.

For a group x of ``g`` consecutive channels (last dim) of one token and head::

    S = (max − min) / (2^N − 1),  Z = −min,  q = clamp(round((x + Z) / S), 0, 2^N − 1),  x̂ = q·S − Z

Codes are computed in float64 from the exact min/max (so they equal a float64 reference: a float32 division
flips a few codes in a million next to the rounding boundaries) and stored packed (``bits`` ≤ 8: several codes per uint8 word;
16 bit: one int16 word). Each group also stores two float16 numbers (2 bytes each). We store the group's
*range* R = max − min = (2^N − 1)·S rather than S itself: the same 2 bytes and the same S = R/(2^N − 1), but
(i) ERS leaves R unchanged (2^{2b} − 1 = (2^b − 1)(2^b + 1), so S_b = (2^b + 1)·S_{2b} exactly), and (ii) a
16-bit S = R/65535 underflows float16 for ranges below ~4e-3, R does not. A constant group (R = 0) gets
S := 1 for the code computation, all codes 0, and dequantises to its value.

ERS (2b → b bits)::

    X_b = ((2^{2b} − 2^b + 1)·(X_{2b} + 2^{b−1})) >> 3b   (masked to b bits, int64: overflows int32 at b = 8)

equals round(X_{2b} / (2^b + 1)) for every code, so the chain 16 → 8 → 4 → 2 gives the codes of direct
quantisation to 2 bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from iclr26_core.errors import UserError

QUANT_BITS = (16, 8, 4, 2, 1)  # what quantize_groups accepts (1 bit: sensitivity only)
CACHE_BITS = (16, 8, 4, 2)  # what a cache stores
FP16_BYTES = 2  # bytes of one stored float16 (range or zero) and of one full-precision KV element


def check_bits(bits: int, allowed: Sequence[int] = QUANT_BITS, what: str = "bits") -> int:
    if isinstance(bits, bool) or int(bits) != bits or int(bits) not in allowed:
        raise UserError(f"{what} must be one of {', '.join(map(str, allowed))}, got {bits!r}")
    return int(bits)


def resolve_group_size(head_dim: int, group_size: int | None = None) -> int:
    """g = min(128, head_dim) by default; g must divide head_dim."""
    g = min(128, head_dim) if group_size is None else int(group_size)
    if g <= 0 or head_dim % g:
        raise UserError(f"group_size {group_size} must be a positive divisor of head_dim {head_dim}")
    return g


def _per_word(bits: int) -> int:
    return 8 // bits if bits <= 8 else 1


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer codes [..., D] in [0, 2^bits) → packed words along the last dim (uint8, or int16 at 16 bit)."""
    if bits == 16:
        return (codes.to(torch.int32) - 32768).to(torch.int16)
    per = _per_word(bits)
    d = codes.shape[-1]
    pad = (-d) % per
    c = codes.to(torch.int32)
    if pad:
        c = torch.nn.functional.pad(c, (0, pad))
    c = c.view(*c.shape[:-1], -1, per)
    shifts = torch.arange(per, dtype=torch.int32, device=c.device) * bits
    return (c << shifts).sum(-1).to(torch.uint8)


def unpack(words: torch.Tensor, bits: int, dim: int) -> torch.Tensor:
    """Inverse of `pack`: int64 codes [..., dim]."""
    if bits == 16:
        return words.to(torch.int64) + 32768
    per = _per_word(bits)
    shifts = torch.arange(per, dtype=torch.int64, device=words.device) * bits
    codes = (words.to(torch.int64).unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    return codes.reshape(*words.shape[:-1], -1)[..., :dim]


def equivalent_right_shift(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """2b-bit codes → b-bit codes, ``bits`` = b: round(X / (2^b + 1)) computed with integers only (int64)."""
    b = check_bits(bits, (8, 4, 2, 1), "target bits")
    x = codes.to(torch.int64)
    mult = (1 << (2 * b)) - (1 << b) + 1
    return ((mult * (x + (1 << (b - 1)))) >> (3 * b)) & ((1 << b) - 1)


def naive_right_shift(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """The naive 2b → b shift the paper compares against: floor(X >> b) (scale becomes S·2^b)."""
    b = check_bits(bits, (8, 4, 2, 1), "target bits")
    return codes.to(torch.int64) >> b


@dataclass
class QuantizedGroups:
    """Packed codes plus float16 range and zero per group.

    packed: [..., ceil(D·bits/8)] uint8 (int16 [..., D] at 16 bit); range_, zero: [..., D/g] float16.
    """

    packed: torch.Tensor
    range_: torch.Tensor
    zero: torch.Tensor
    bits: int
    group_size: int
    dim: int

    @property
    def codes(self) -> torch.Tensor:
        """int64 codes [..., D]."""
        return unpack(self.packed, self.bits, self.dim)

    @property
    def scale(self) -> torch.Tensor:
        """S = R / (2^N − 1) in float32 [..., D/g] (0 for constant groups, which dequantise to −Z)."""
        return self.range_.float() / float((1 << self.bits) - 1)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """x̂ = q·S − Z, [..., D]."""
        q = self.codes.to(torch.float32).unflatten(-1, (-1, self.group_size))
        x = q * self.scale.unsqueeze(-1) - self.zero.float().unsqueeze(-1)
        return x.flatten(-2).to(dtype)

    def shrink(self) -> QuantizedGroups:
        """ERS to half the bits: codes X_{N/2} = round(X_N / (2^{N/2} + 1)); range and zero unchanged."""
        if self.bits < 2:
            raise UserError(f"cannot shrink {self.bits}-bit codes further")
        b = self.bits // 2
        codes = equivalent_right_shift(self.codes, b)
        return QuantizedGroups(pack(codes, b), self.range_, self.zero, b, self.group_size, self.dim)

    @property
    def code_bytes(self) -> int:
        return self.packed.numel() * self.packed.element_size()

    @property
    def scale_bytes(self) -> int:
        return (self.range_.numel() + self.zero.numel()) * FP16_BYTES

    @property
    def nbytes(self) -> int:
        """Bytes actually stored: packed codes + float16 ranges + float16 zeros."""
        return self.code_bytes + self.scale_bytes

    @property
    def num_tokens(self) -> int:
        return self.packed.shape[-2] if self.packed.dim() >= 2 else 1

    @staticmethod
    def cat(parts: Sequence[QuantizedGroups], dim: int = -2) -> QuantizedGroups:
        """Concatenate along a leading dim (tokens: -2); all parts must share bits and group size."""
        first = parts[0]
        if any(p.bits != first.bits or p.group_size != first.group_size for p in parts):
            raise ValueError("cannot concatenate quantised groups of different bits or group sizes")
        return QuantizedGroups(
            torch.cat([p.packed for p in parts], dim),
            torch.cat([p.range_ for p in parts], dim),
            torch.cat([p.zero for p in parts], dim),
            first.bits,
            first.group_size,
            first.dim,
        )

    def index_select(self, dim: int, index: torch.Tensor) -> QuantizedGroups:
        return QuantizedGroups(
            self.packed.index_select(dim, index),
            self.range_.index_select(dim, index),
            self.zero.index_select(dim, index),
            self.bits,
            self.group_size,
            self.dim,
        )


def quantize_groups(x: torch.Tensor, bits: int, group_size: int | None = None) -> QuantizedGroups:
    """Quantise ``x`` [..., D] per group of ``group_size`` channels of the last dim (default min(128, D))."""
    bits = check_bits(bits)
    d = x.shape[-1]
    g = resolve_group_size(d, group_size)
    groups = x.detach().to(torch.float64).unflatten(-1, (-1, g))
    lo = groups.amin(-1)
    rng = groups.amax(-1) - lo
    levels = float((1 << bits) - 1)
    scale = torch.where(rng > 0, rng / levels, torch.ones_like(rng))
    q = torch.round((groups + (-lo).unsqueeze(-1)) / scale.unsqueeze(-1)).clamp_(0, levels)
    codes = q.to(torch.int64).flatten(-2)
    return QuantizedGroups(pack(codes, bits), rng.to(torch.float16), (-lo).to(torch.float16), bits, g, d)


def fake_quantize(x: torch.Tensor, bits: int, group_size: int | None = None) -> torch.Tensor:
    """Q_b(x): quantise and dequantise (same dtype as x)."""
    return quantize_groups(x, bits, group_size).dequantize(x.dtype)
