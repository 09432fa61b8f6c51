"""Block-wise absmax 4-bit quantisation with a 16-level codebook (the QLoRA/NF4 setting; arXiv 2505.06653 Sec. 2).

For a weight tensor with n elements, flattened in row-major order (for an ``nn.Linear`` weight [out, in] the
blocks run along the input dimension), split into B = ⌈n / I⌉ blocks of I weights; the last block is padded
with zeros, which never count in errors. Per block b:

* scale m_b — unsigned absmax (NF4, AF4, BOF4): m_b = max_i |w_{b,i}|; signed absmax (BOF4-S):
  m_b = w_{b,j*} with j* = argmax_i |w_{b,i}|, so the max-magnitude weight maps to exactly +1; when +a and −a
  tie for the largest magnitude the positive one wins (m_b = +a, whatever the order), so +a is kept exact and
  −a → −1 is rounded to the lowest level like any other value; an all-zero block gets m_b := 1. m_b is stored in float16 unless some nonzero |m_b| lies outside
  float16's normal range [2⁻¹⁴, 65504] (then float32). Normalisation divides by the *stored* scale.
* normalised x = w / m_b, code = index of the nearest level, with the thresholds ξ_ℓ = (x̂_ℓ + x̂_{ℓ+1}) / 2
  computed exactly (float64): a value exactly on a threshold goes to the UPPER level.
* codes are packed two per uint8: element 2k in the high nibble, element 2k+1 in the low nibble.
* dequantisation ŵ = m_b · x̂(code), then OPQ outliers (if any) are scattered back (see :mod:`.opq`).

Storage: n/2 bytes of codes + B scales (2 or 4 bytes) + 10 bytes per outlier (int64 index + bfloat16 value);
the 16-level codebook itself is shared and not counted. At I = 64 without outliers: 4.25 bits per weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from iclr26_core.errors import UserError

from .blockwise import (  # noqa: F401 - re-exported: the quantiser's building blocks
    FP16_MAX,
    FP16_MIN_NORMAL,
    absmax,
    block_scales,
    nearest_level,
    pack_codes,
    scale_dtype_for,
    unpack_codes,
)
from .codebooks import resolve_codebook
from .config import check_block_size, check_opq_q
from .opq import find_outliers

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass
class Quantized:
    """A block-wise 4-bit quantised tensor.

    codes: (⌈B·I/2⌉,) uint8 packed codes; scales: (B,) float16/float32; outlier_idx: (K,) int64 flat indices
    into the original tensor; outlier_val: (K,) bfloat16; codebook: (16,) float32 levels.
    """

    codes: torch.Tensor
    scales: torch.Tensor
    outlier_idx: torch.Tensor
    outlier_val: torch.Tensor
    shape: tuple[int, ...]
    dtype: torch.dtype
    codebook: torch.Tensor
    block_size: int
    signed: bool
    codebook_name: str | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def n_blocks(self) -> int:
        return self.scales.numel()

    def unpacked_codes(self) -> torch.Tensor:
        """(B, I) uint8 codes (padding included)."""
        return unpack_codes(self.codes, self.n_blocks * self.block_size).reshape(
            self.n_blocks, self.block_size
        )

    def dequantize(self) -> torch.Tensor:
        """ŵ = m_b · x̂(code), outliers scattered back; original shape and dtype."""
        levels = self.codebook.float().to(self.codes.device)
        values = levels[self.unpacked_codes().long()] * self.scales.float()[:, None]
        flat = values.reshape(-1)[: self.numel]
        if self.outlier_idx.numel():
            flat = flat.clone()
            flat[self.outlier_idx] = self.outlier_val.float()
        return flat.reshape(self.shape).to(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of codes + scales + outliers (the shared 16-level codebook is not counted)."""
        return sum(
            t.numel() * t.element_size()
            for t in (self.codes, self.scales, self.outlier_idx, self.outlier_val)
        )

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.nbytes / max(self.numel, 1)

    @property
    def outlier_fraction(self) -> float:
        return self.outlier_idx.numel() / max(self.numel, 1)


def _check_weight(weight: torch.Tensor) -> torch.Tensor:
    if not isinstance(weight, torch.Tensor):
        raise UserError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if weight.dtype not in FLOAT_DTYPES:
        raise UserError(f"weight must be a float16/bfloat16/float32/float64 tensor, got {weight.dtype}")
    if weight.numel() == 0:
        raise UserError("weight is empty (0 elements)")
    if not bool(torch.isfinite(weight).all()):
        raise UserError("weight contains NaN or Inf values; cannot quantise")
    return weight


def quantize(
    weight: torch.Tensor,
    codebook: str | torch.Tensor = "bof4s-mse",
    block_size: int = 64,
    opq_q: float | None = None,
    scale_dtype: str = "auto",
) -> Quantized:
    """Block-wise (signed) absmax 4-bit quantisation of ``weight`` (any shape) → :class:`Quantized`.

    ``codebook``: a name of :data:`CODEBOOK_NAMES` (``bof4s-*`` are signed) or 16 ascending levels in
    [−1, 1] (treated as signed iff −1 is not among them). ``opq_q``: OPQ quantile (None = off).
    """
    check_block_size(block_size)
    opq_q = check_opq_q(opq_q)
    if scale_dtype not in ("auto", "float16", "float32"):
        raise UserError(f"unknown scale_dtype {scale_dtype!r}; choose one of auto, float16, float32")
    levels, signed, name = resolve_codebook(codebook, block_size)
    weight = _check_weight(weight).detach()
    levels = levels.to(weight.device)
    n = weight.numel()
    n_blocks = -(-n // block_size)
    flat = weight.reshape(-1).to(torch.float32 if weight.dtype != torch.float64 else torch.float64)
    blocks = torch.zeros(n_blocks * block_size, dtype=flat.dtype, device=flat.device)
    blocks[:n] = flat
    blocks = blocks.reshape(n_blocks, block_size)

    outlier_idx = torch.zeros(0, dtype=torch.int64, device=flat.device)
    outlier_val = torch.zeros(0, dtype=torch.bfloat16, device=flat.device)
    if opq_q is not None:
        mask = find_outliers(blocks, n, opq_q, block_size)
        outlier_idx = mask.reshape(-1).nonzero().squeeze(1)
        outlier_val = blocks.reshape(-1)[outlier_idx].to(torch.bfloat16)
        blocks = blocks.masked_fill(mask, 0.0)  # zeroed before the (signed) max search

    m = block_scales(blocks, signed)
    scales = m.to(scale_dtype_for(m, scale_dtype))
    x = blocks / scales.to(blocks.dtype)[:, None]
    codes = nearest_level(x, levels)
    return Quantized(
        codes=pack_codes(codes.reshape(-1)),
        scales=scales,
        outlier_idx=outlier_idx,
        outlier_val=outlier_val,
        shape=tuple(weight.shape),
        dtype=weight.dtype,
        codebook=levels,
        block_size=block_size,
        signed=signed,
        codebook_name=name,
    )


def dequantize(q: Quantized) -> torch.Tensor:
    """ŵ of a :class:`Quantized` tensor, in its original shape and dtype."""
    return q.dequantize()


def quantization_error(
    weight: torch.Tensor,
    codebook: str | torch.Tensor = "bof4s-mse",
    block_size: int = 64,
    opq_q: float | None = None,
) -> dict[str, float]:
    """Quantise + dequantise ``weight``; ``{"mse", "mae", "outlier_fraction", "bits_per_weight"}``.

    Errors are means over the n real weights (padding excluded), computed in float64 between the original
    weight and the dequantised tensor in the original dtype (what a user of the weights sees).
    """
    q = quantize(weight, codebook=codebook, block_size=block_size, opq_q=opq_q)
    diff = q.dequantize().double() - weight.detach().double()
    return {
        "mse": float(diff.square().mean()),
        "mae": float(diff.abs().mean()),
        "outlier_fraction": q.outlier_fraction,
        "bits_per_weight": q.bits_per_weight,
    }
