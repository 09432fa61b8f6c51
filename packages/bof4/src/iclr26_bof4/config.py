"""`BOF4Config`: the knobs of BOF4 quantisation in one dataclass.

Paper: Blumenberg, Graave, Fingscheidt, "Improving Block-Wise LLM Quantization by 4-bit Block-Wise Optimal
Float (BOF4): Analysis and Variations", ICLR 2026 — https://arxiv.org/abs/2505.06653
(OpenReview VpZ8YYdBmT).

This module imports nothing heavy (no torch): the CLI reads it for ``--help``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from iclr26_core.errors import UserError

#: names accepted by :func:`iclr26_bof4.codebook` (Sec. 3-4 and Table 6 of the paper)
CODEBOOK_NAMES: tuple[str, ...] = ("nf4", "af4", "bof4-mse", "bof4-mae", "bof4s-mse", "bof4s-mae")
#: the BOF4 family: name -> (metric the levels minimise, signed absmax)
BOF4_VARIANTS: dict[str, tuple[str, bool]] = {
    "bof4-mse": ("mse", False),
    "bof4-mae": ("mae", False),
    "bof4s-mse": ("mse", True),
    "bof4s-mae": ("mae", True),
}
#: AF4 is published for this block size only (Table 6); an unweighted MAE Lloyd run does not regenerate it
AF4_BLOCK_SIZE = 64
MODES: tuple[str, ...] = ("fake", "packed")
SCALE_DTYPES: tuple[str, ...] = ("auto", "float16", "float32")


@dataclass
class BOF4Config:
    """How to quantise the weights of a model with BOF4 (arXiv 2505.06653).

    Fields
    ------
    codebook:
        one of :data:`CODEBOOK_NAMES`. ``bof4-*`` are the block-wise optimal codebooks of Sec. 3 (levels in
        Table 6, optimised for the MSE or MAE of the *original* weights, Eq. for MSE(W) = mean_b m_b² MSE(X_b));
        ``bof4s-*`` use signed absmax normalisation (Sec. 4.1, "BOF4-S"); ``nf4`` (QLoRA) and ``af4``
        (AbnormalFloat, block size 64 only) are the baselines of Table 1. Default ``bof4s-mse``.
    block_size:
        I, the number of weights sharing one absmax scale (Sec. 2; the paper's default and Table 6: I = 64;
        Fig. 2 sweeps I = 32 … 256 and beyond).
    opq_q:
        quantile q of outlier-preserving quantisation (OPQ, Sec. 4.2): a weight is kept in bfloat16 when
        |w| > σ_b · Φ⁻¹((1 + q^{1/I}) / 2). ``None`` disables OPQ. The paper searched
        q ∈ {0.9, 0.95, 0.97, 0.99} and recommends 0.95 (Table 1, "BOF4-S + OPQ").
    mode:
        ``"fake"`` writes dequantised weights back into the ``nn.Linear`` modules (numerically what QLoRA
        trains on); ``"packed"`` swaps in :class:`iclr26_bof4.BOF4Linear` holding 4-bit codes.
    skip:
        module names (exact, a dotted component, or an fnmatch pattern) left in full precision; embeddings are
        never quantised. QLoRA convention (and the paper's setup, Sec. 5): ``("lm_head",)``.
    scale_dtype:
        storage of the per-block scales m_b: ``"auto"`` = float16 (16-bit scales as in Sec. 5, no double
        quantisation) unless some nonzero |m_b| is outside float16's normal range, then float32;
        ``"float16"`` / ``"float32"`` force one (``"float16"`` still falls back when it would overflow).
    """

    codebook: str = "bof4s-mse"
    block_size: int = 64
    opq_q: float | None = 0.95
    mode: str = "fake"
    skip: tuple[str, ...] = field(default_factory=lambda: ("lm_head",))
    scale_dtype: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.skip, str):
            self.skip = (self.skip,)
        self.skip = tuple(self.skip)
        self.codebook = str(self.codebook).strip().lower()
        self.validate()

    def validate(self) -> None:
        """Raise :class:`UserError` with one clear line when a field is out of range."""
        if self.codebook not in CODEBOOK_NAMES:
            raise UserError(f"unknown codebook {self.codebook!r}; choose one of {', '.join(CODEBOOK_NAMES)}")
        check_block_size(self.block_size)
        check_opq_q(self.opq_q)
        if self.mode not in MODES:
            raise UserError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.scale_dtype not in SCALE_DTYPES:
            raise UserError(
                f"unknown scale_dtype {self.scale_dtype!r}; choose one of {', '.join(SCALE_DTYPES)}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["skip"] = list(self.skip)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BOF4Config:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise UserError(f"unknown BOF4Config field(s): {', '.join(unknown)}")
        if "skip" in known:
            known["skip"] = tuple(known["skip"])
        return cls(**known)


def codebook_available(name: str, block_size: int) -> bool:
    """Whether codebook ``name`` exists at ``block_size``: every codebook at every I ≥ 2, except AF4 (I = 64)."""
    return name != "af4" or block_size == AF4_BLOCK_SIZE


def check_block_size(block_size: Any) -> int:
    """``block_size`` as an int ≥ 2, else :class:`UserError`."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 2:
        raise UserError(f"block_size must be an integer >= 2, got {block_size!r}")
    return block_size


def check_opq_q(opq_q: Any) -> float | None:
    """``opq_q`` as a float in the open interval (0, 1), or None; else :class:`UserError`."""
    if opq_q is None:
        return None
    if isinstance(opq_q, bool) or not isinstance(opq_q, int | float) or not 0.0 < float(opq_q) < 1.0:
        raise UserError(f"opq_q must be a number in the open interval (0, 1) or None, got {opq_q!r}")
    return float(opq_q)
