"""Block-wise absmax maths with no package dependencies: block maxima, nearest-level codes, nibble packing.

The bottom layer of the package (arXiv 2505.06653 Sec. 2): :mod:`.quantizer` builds the :class:`Quantized`
tensor on these, :mod:`.lloyd` normalises its Gaussian blocks with :func:`absmax`.
"""

from __future__ import annotations

import torch

FP16_MAX = 65504.0
FP16_MIN_NORMAL = 2.0**-14
_CHUNK = 1 << 22  # elements per chunk of the float64 threshold search


def nearest_level(x: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """Index of the nearest level for every element of ``x`` → uint8 tensor of x's shape.

    ``levels``: (L,) ascending. thresholds ξ (L−1,) are exact midpoints (float64); code = #{ξ ≤ x}, so a value
    exactly on a threshold goes to the upper level.
    """
    lv = levels.double()
    thresholds = (lv[:-1] + lv[1:]) / 2
    flat = x.reshape(-1)
    thresholds = thresholds.to(flat.device)
    out = torch.empty(flat.shape, dtype=torch.uint8, device=flat.device)
    for start in range(0, flat.numel(), _CHUNK):
        chunk = flat[start : start + _CHUNK].double()
        out[start : start + _CHUNK] = torch.searchsorted(thresholds, chunk, right=True).to(torch.uint8)
    return out.reshape(x.shape)


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """(N,) uint8 codes in [0, 16) → (⌈N/2⌉,) uint8; element 2k → high nibble, 2k+1 → low nibble."""
    flat = codes.reshape(-1).to(torch.uint8)
    if flat.numel() % 2:
        flat = torch.cat([flat, flat.new_zeros(1)])
    return (flat[0::2] << 4) | flat[1::2]


def unpack_codes(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`pack_codes`: (⌈n/2⌉,) uint8 → (n,) uint8."""
    out = torch.stack([packed >> 4, packed & 0x0F], dim=1).reshape(-1)
    return out[:n]


def absmax(blocks: torch.Tensor, signed: bool) -> torch.Tensor:
    """(B, I) → (B,) block maxima in the blocks' dtype: max |w|, or the signed max-magnitude weight.

    Signed ties (+a and −a both of magnitude a) resolve to +a, independently of their positions.
    """
    hi, lo = blocks.amax(dim=1), blocks.amin(dim=1)
    if signed:
        return torch.where(hi >= -lo, hi, lo)
    return torch.maximum(hi, -lo)


def block_scales(blocks: torch.Tensor, signed: bool) -> torch.Tensor:
    """(B, I) → (B,) float32 scales m_b: absmax, or signed absmax (see :func:`absmax`); all-zero blocks get 1."""
    m = absmax(blocks, signed).float()
    return torch.where(m == 0, torch.ones_like(m), m)


def scale_dtype_for(scales: torch.Tensor, policy: str = "auto") -> torch.dtype:
    """float16 unless a nonzero |m_b| is outside [2⁻¹⁴, 65504] (or ``policy == "float32"``)."""
    if policy == "float32":
        return torch.float32
    mags = scales.abs()
    if bool((mags > FP16_MAX).any()):
        return torch.float32
    if policy == "auto" and bool(((mags > 0) & (mags < FP16_MIN_NORMAL)).any()):
        return torch.float32
    return torch.float16
