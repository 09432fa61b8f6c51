"""Settings of OBR and its baselines, and the checks that turn bad values into one clear line.

Optimal Brain Restoration (Guo, Li, Benini; arXiv 2509.11177, ICLR 2026). Defaults are the official code's
(Sec. 4.1 of the paper): W4 symmetric per-output-channel with MSE clipping, 50 % unstructured Wanda mask,
α = 0.5, percdamp 0.01, GPTQ blocks of 128.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from iclr26_core.errors import UserError

#: OBR variants (final quantiser) and the baselines built from the same parts (Table 1 of the paper)
OBR_METHODS = ("obr_gptq", "obr_rtn")
BASELINES = ("rtn", "gptq", "wanda_rtn", "wanda_gptq", "sparsegpt_gptq", "sparsegpt_joint")
METHODS = OBR_METHODS + BASELINES
MASKS = ("wanda", "magnitude", "sparsegpt")
SCALE_SOURCES = ("dense", "compensated")


def check_sparsity(sparsity: float) -> float:
    """Unstructured sparsity: a fraction in [0, 1)."""
    try:
        s = float(sparsity)
    except (TypeError, ValueError):
        raise UserError(f"sparsity must be a number in [0, 1), got {sparsity!r}") from None
    if not (0.0 <= s < 1.0) or math.isnan(s):
        raise UserError(f"sparsity must be in [0, 1), got {sparsity!r}")
    return s


def parse_nm(nm: Any) -> tuple[int, int] | None:
    """``None``, ``(N, M)`` or ``"N:M"`` → ``(N, M)``: keep N of every M consecutive input columns (2:4)."""
    if nm is None or nm == "" or (isinstance(nm, str) and nm.lower() == "none"):
        return None
    try:
        if isinstance(nm, str):
            n_str, _, m_str = nm.partition(":")
            n, m = int(n_str), int(m_str)
        else:
            n, m = (int(v) for v in nm)
    except (TypeError, ValueError):
        raise UserError(f"nm must be 'N:M' (e.g. 2:4), got {nm!r}") from None
    if n < 1 or m < 2 or n >= m:
        raise UserError(f"nm={n}:{m}: need 1 <= N < M (N kept of every M)")
    return n, m


def check_nm_fits(nm: tuple[int, int] | None, columns: int) -> None:
    if nm is not None and columns % nm[1] != 0:
        raise UserError(f"nm={nm[0]}:{nm[1]}: M={nm[1]} does not divide the {columns} input columns")


def check_bits(bits: Any) -> int | None:
    """Weight bits in 2..8, or ``None`` (no quantisation: pruning alone)."""
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, int | float) or int(bits) != bits:
        raise UserError(f"bits must be an integer in 2..8, got {bits!r}")
    if not 2 <= int(bits) <= 8:
        raise UserError(f"bits must be in 2..8, got {bits}")
    return int(bits)


def check_alpha(alpha: Any) -> float:
    """The fraction α of the columns whose quantisation error is evicted to the others, in (0, 1)."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise UserError(f"alpha must be a number in (0, 1), got {alpha!r}") from None
    if not 0.0 < a < 1.0:
        raise UserError(f"alpha must be in (0, 1), got {alpha!r}")
    return a


def check_percdamp(percdamp: Any) -> float:
    p = float(percdamp)
    if not 0.0 <= p < 10.0 or math.isnan(p):
        raise UserError(f"percdamp must be in [0, 10), got {percdamp!r}")
    return p


def check_method(method: str) -> str:
    if method not in METHODS:
        raise UserError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def check_mask_name(mask: str) -> str:
    if mask not in MASKS:
        raise UserError(f"unknown mask {mask!r}; choose one of {', '.join(MASKS)} (or pass a bool tensor)")
    return mask


@dataclass
class OBRConfig:
    """One compression setting (paper Sec. 3-4; official code defaults).

    sparsity: fraction of weights pruned per output row (Wanda, Sec. 4.1: 50 %); ignored when ``nm`` is set.
    nm: ``(N, M)`` semi-structured sparsity, N kept of every M input columns (Table 4: 2:4).
    bits: weight bits, symmetric per output channel, levels −2^(b−1) … 2^(b−1)−1 (None: no quantisation).
    alpha: α of Eq. (10): the first ⌊α·Cin⌋ columns are E2, their quantisation error goes to the rest.
    percdamp: H += percdamp·mean(diag H)·I (GPTQ's damping).
    mask: the pruner (wanda |W_ij|·‖X_j‖₂, magnitude |W_ij|, sparsegpt OBS saliency).
    e2_split: ``columns`` (official code: E2 = kept columns with index < α·Cin) or ``count`` (paper text:
        the first ⌊α·|R1|⌋ kept entries of each row; OBR_RTN only).
    scales_from: where OBR's per-row quantisation scales come from, computed once and used in steps 2 and 3:
        ``dense`` (the official code: ``quantizer.find_params(W)`` on the dense weight before pruning) or
        ``compensated`` (from w̄, the weights after step 1; an extra arm, 2-7 % lower error on the synthetic
        layer).
    rescale_final: recompute the quantiser's scales from the compensated weights w̃ before the final step
        (default: keep the scales of ``scales_from``, so e_E2 is exactly the final quantiser's error on E2).
    mse_clip: search the clipping ratio p ∈ {1.00, 0.99, …, 0.21} minimising Σ|Q(w) − w|^2.4 per row.
    blocksize: GPTQ / SparseGPT block of columns (128).
    """

    method: str = "obr_gptq"
    sparsity: float = 0.5
    nm: tuple[int, int] | None = None
    bits: int | None = 4
    alpha: float = 0.5
    percdamp: float = 0.01
    mask: str = "wanda"
    e2_split: str = "columns"
    scales_from: str = "dense"
    rescale_final: bool = False
    mse_clip: bool = True
    blocksize: int = 128

    def __post_init__(self) -> None:
        check_method(self.method)
        self.sparsity = check_sparsity(self.sparsity)
        self.nm = parse_nm(self.nm)
        self.bits = check_bits(self.bits)
        self.alpha = check_alpha(self.alpha)
        self.percdamp = check_percdamp(self.percdamp)
        check_mask_name(self.mask)
        if self.e2_split not in ("columns", "count"):
            raise UserError(f"e2_split must be 'columns' or 'count', got {self.e2_split!r}")
        if self.scales_from not in SCALE_SOURCES:
            raise UserError(f"scales_from must be 'dense' or 'compensated', got {self.scales_from!r}")
        if self.e2_split == "count" and self.method == "obr_gptq":
            raise UserError("e2_split='count' needs method obr_rtn (OBR_GPTQ's GPTQ stage splits by column)")
        if int(self.blocksize) < 1:
            raise UserError(f"blocksize must be >= 1, got {self.blocksize}")
        if self.bits is None and self.method in ("rtn", "gptq"):
            raise UserError(f"method {self.method} quantises: bits cannot be None")

    @property
    def prunes(self) -> bool:
        return self.nm is not None or self.sparsity > 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["nm"] = f"{self.nm[0]}:{self.nm[1]}" if self.nm else None
        return d
