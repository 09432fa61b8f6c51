"""OBR on one weight matrix, and the baselines built from the same parts on the same Hessian.

OBR (Sec. 3 of arXiv 2509.11177), per output row, H the damped Hessian, M the keep-mask of a pruner:

1. sparsity: R1 = kept, E1 = pruned; δ1 = H_R1R1⁻¹·H_R1E1·w_E1; w̄ = w + δ1 on R1, 0 on E1.
2. quantisation: s = per-row scales computed once, from the dense W before pruning (``scales_from="dense"``,
   the official code's ``quantizer.find_params(W)``) or from w̄ (``"compensated"``), and reused in step 3, so
   e_E2 below is exactly the final quantiser's error on E2; e = w̄ − Q(w̄); E2 = kept columns with index < ⌊α·Cin⌋ (``e2_split="columns"``, the official
   code) or the first ⌊α·|R1|⌋ kept entries of the row (``"count"``, the paper's wording); R2 = the other kept
   columns; δ2 = H_R2R2⁻¹·H_R2E2·e_E2; w̃ = w̄ + δ2 on R2.
3. final quantisation: OBR_RTN rounds w̃ to nearest; OBR_GPTQ rounds the first ⌊α·Cin⌋ columns to nearest and
   runs mask-preserving GPTQ on the rest with H restricted to those columns (the official code slices the
   Cholesky factor of the full H⁻¹, which is the same; it hard-codes the stitch at 0.5 — any α works here).

Pruned weights are exactly 0 in every output (the quantiser is symmetric). ``bits=None`` skips 2-3 (OBR as a
pruning add-on, Table 6 of the paper); ``sparsity=0`` without ``nm`` skips 1 (OBR as a quantisation add-on,
Table 7).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from iclr26_core.errors import UserError

from .compensation import group_error_compensation
from .config import OBRConfig, check_nm_fits
from .gptq import gptq_quantize
from .hessian import PreparedLayer, prepare
from .masks import act_norms_from_hessian, magnitude_mask, sparsity_of, wanda_mask
from .quantizer import codes_of, find_scales, quantize
from .sparsegpt import sparsegpt_prune


@dataclass
class CompressedWeight:
    """The result of compressing one [Cout, Cin] weight.

    weight: dequantised weight (exact zeros where pruned), in the input's dtype. mask: [Cout, Cin] bool, True =
    kept. codes: int8 [Cout, Cin] (None without quantisation). scales: [Cout] (None without quantisation).
    """

    weight: torch.Tensor
    mask: torch.Tensor
    codes: torch.Tensor | None
    scales: torch.Tensor | None
    bits: int | None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def sparsity(self) -> float:
        return sparsity_of(self.mask)


def _mask(prep: PreparedLayer, cfg: OBRConfig, mask: Any, act_norms: torch.Tensor | None) -> torch.Tensor:
    W = prep.weight
    if isinstance(mask, torch.Tensor):
        if mask.shape != W.shape:
            raise UserError(f"the mask is {tuple(mask.shape)} but the weight is {tuple(W.shape)}")
        return mask.to(device=W.device, dtype=torch.bool)
    if not cfg.prunes:
        return torch.ones_like(W, dtype=torch.bool)
    if mask == "wanda":
        norms = act_norms_from_hessian(prep.hessian) if act_norms is None else act_norms.to(W)
        if norms.shape != (W.shape[1],):
            raise UserError(f"act_norms must have {W.shape[1]} entries, got {tuple(norms.shape)}")
        return wanda_mask(W, norms, cfg.sparsity, cfg.nm)
    if mask == "magnitude":
        return magnitude_mask(W, cfg.sparsity, cfg.nm)
    _, keep = sparsegpt_prune(W, prep.damped, cfg.sparsity, cfg.nm, blocksize=cfg.blocksize)
    return keep


def _finish(Q: torch.Tensor, keep: torch.Tensor, scales, cfg: OBRConfig, weight: torch.Tensor, t0: float):
    Q = Q * keep.to(Q.dtype)  # exact zeros (RTN/GPTQ already give them; cheap insurance against -0.0)
    codes = codes_of(Q, scales, cfg.bits) if scales is not None and cfg.bits is not None else None
    return CompressedWeight(
        weight=Q.to(weight.dtype),
        mask=keep,
        codes=codes,
        scales=scales,
        bits=cfg.bits,
        info={**cfg.to_dict(), "seconds": time.perf_counter() - t0, "sparsity": sparsity_of(keep)},
    )


def obr_compress(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    *,
    sparsity: float = 0.5,
    nm: tuple[int, int] | str | None = None,
    mask: str | torch.Tensor = "wanda",
    act_norms: torch.Tensor | None = None,
    bits: int | None = 4,
    quantizer: str = "gptq",
    alpha: float = 0.5,
    percdamp: float = 0.01,
    e2_split: str = "columns",
    scales_from: str = "dense",
    rescale_final: bool = False,
    mse_clip: bool = True,
    blocksize: int = 128,
) -> CompressedWeight:
    """OBR of ``weight`` [Cout, Cin] with the calibration Hessian ``hessian`` [Cin, Cin] (undamped, 2XXᵀ/L).

    ``quantizer``: ``gptq`` (OBR_GPTQ) or ``rtn`` (OBR_RTN). ``mask``: a pruner's name or a keep-mask tensor.
    Wanda's ‖X_j‖ defaults to sqrt(L·diag(H)/2) of the undamped Hessian. ``scales_from``: ``dense`` (official)
    or ``compensated`` (scales of w̄).
    """
    if quantizer not in ("gptq", "rtn"):
        raise UserError(f"quantizer must be 'gptq' or 'rtn', got {quantizer!r}")
    cfg = OBRConfig(
        method=f"obr_{quantizer}",
        sparsity=sparsity,
        nm=nm,
        bits=bits,
        alpha=alpha,
        percdamp=percdamp,
        mask=mask if isinstance(mask, str) else "wanda",
        e2_split=e2_split,
        scales_from=scales_from,
        rescale_final=rescale_final,
        mse_clip=mse_clip,
        blocksize=blocksize,
    )
    t0 = time.perf_counter()
    prep = prepare(weight, hessian, cfg.percdamp)
    check_nm_fits(cfg.nm, prep.weight.shape[1])
    W, H = prep.weight, prep.damped
    keep = _mask(prep, cfg, mask, act_norms)
    # step 1: the kept weights absorb the pruned ones
    delta1 = group_error_compensation(H, keep, torch.where(keep, 0.0, -W))
    w_bar = (W + delta1) * keep
    if cfg.bits is None:
        return _finish(w_bar, keep, None, cfg, weight, t0)
    # step 2: the kept columns right of the split absorb the quantisation error of those left of it
    dense = weight.detach().to(W)  # the official code: scales of the dense W as it arrives
    scales = find_scales(dense if cfg.scales_from == "dense" else w_bar, cfg.bits, mse=cfg.mse_clip)
    cols = W.shape[1]
    split = int(cfg.alpha * cols)
    if cfg.e2_split == "columns":
        e2 = keep & (torch.arange(cols, device=W.device) < split).unsqueeze(0)
    else:
        rank = torch.cumsum(keep.to(torch.int64), dim=1)
        e2 = keep & (rank <= (cfg.alpha * keep.sum(dim=1, keepdim=True)).floor())
    r2 = keep & ~e2
    err = torch.where(e2, quantize(w_bar, scales, cfg.bits) - w_bar, 0.0)
    w_tilde = w_bar + group_error_compensation(H, r2, err)
    if cfg.rescale_final:
        scales = find_scales(w_tilde, cfg.bits, mse=cfg.mse_clip)
    # step 3: final quantisation
    if quantizer == "rtn":
        Q = quantize(w_tilde, scales, cfg.bits)
    else:
        Q = torch.empty_like(w_tilde)
        Q[:, :split] = quantize(w_tilde[:, :split], scales, cfg.bits)
        if split < cols:
            Q[:, split:] = gptq_quantize(
                w_tilde[:, split:],
                H[split:, split:],
                scales,
                cfg.bits,
                mask=keep[:, split:],
                blocksize=cfg.blocksize,
            )
    out = _finish(Q, keep, scales, cfg, weight, t0)
    out.info["split"] = split
    return out


def baseline_compress(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    method: str,
    *,
    sparsity: float = 0.5,
    nm: tuple[int, int] | str | None = None,
    act_norms: torch.Tensor | None = None,
    bits: int | None = 4,
    percdamp: float = 0.01,
    mse_clip: bool = True,
    blocksize: int = 128,
    **_: Any,
) -> CompressedWeight:
    """A baseline on the same Hessian: ``rtn``, ``gptq`` (no pruning); ``wanda_rtn``, ``wanda_gptq`` (Wanda mask,
    then RTN / mask-preserving GPTQ); ``sparsegpt_gptq`` (SparseGPT prune with OBS updates, then mask-preserving
    GPTQ); ``sparsegpt_joint`` (one pass, the official baseline). ``bits=None``: the pruning alone.

    The quantiser's scales are computed from the matrix as it enters quantisation (after pruning).
    """
    cfg = OBRConfig(
        method=method,
        sparsity=sparsity if method not in ("rtn", "gptq") else 0.0,
        nm=nm if method not in ("rtn", "gptq") else None,
        bits=bits,
        percdamp=percdamp,
        mse_clip=mse_clip,
        blocksize=blocksize,
    )
    if method.startswith("obr"):
        raise UserError(f"{method} is OBR: use obr_compress")
    t0 = time.perf_counter()
    prep = prepare(weight, hessian, cfg.percdamp)
    check_nm_fits(cfg.nm, prep.weight.shape[1])
    W, H = prep.weight, prep.damped
    if method in ("rtn", "gptq"):
        keep = torch.ones_like(W, dtype=torch.bool)
        Wp = W
    elif method.startswith("wanda"):
        keep = _mask(prep, cfg, "wanda", act_norms)
        Wp = W * keep
    elif method == "sparsegpt_joint":
        if cfg.bits is None:
            Wp, keep = sparsegpt_prune(W, H, cfg.sparsity, cfg.nm, blocksize=cfg.blocksize)
            return _finish(Wp, keep, None, cfg, weight, t0)
        scales = find_scales(W, cfg.bits, mse=cfg.mse_clip)  # the official code: scales of the dense W
        Q, keep = sparsegpt_prune(
            W,
            H,
            cfg.sparsity,
            cfg.nm,
            blocksize=cfg.blocksize,
            quantize=lambda col: quantize(col, scales, cfg.bits),
        )
        return _finish(Q, keep, scales, cfg, weight, t0)
    else:  # sparsegpt_gptq
        Wp, keep = sparsegpt_prune(W, H, cfg.sparsity, cfg.nm, blocksize=cfg.blocksize)
    if cfg.bits is None:
        return _finish(Wp, keep, None, cfg, weight, t0)
    scales = find_scales(Wp, cfg.bits, mse=cfg.mse_clip)
    if method.endswith("rtn"):
        Q = quantize(Wp, scales, cfg.bits)
    else:
        Q = gptq_quantize(Wp, H, scales, cfg.bits, mask=keep, blocksize=cfg.blocksize)
    return _finish(Q, keep, scales, cfg, weight, t0)


def compress(
    weight: torch.Tensor, hessian: torch.Tensor, method: str = "obr_gptq", **kw: Any
) -> CompressedWeight:
    """Dispatch: ``obr_gptq`` / ``obr_rtn`` → `obr_compress`, anything else → `baseline_compress`."""
    if method in ("obr_gptq", "obr_rtn"):
        return obr_compress(weight, hessian, quantizer=method[4:], **kw)
    return baseline_compress(weight, hessian, method, **kw)


def layer_output_error(
    weight: torch.Tensor, weight_hat: torch.Tensor, x: torch.Tensor, *, layout: str
) -> float:
    """‖W·X − Ŵ·X‖²_F / ‖W·X‖²_F for weights [Cout, Cin] and inputs ``x`` in an explicit ``layout``.

    ``layout="LC"``: x is [..., L, Cin] (tokens as rows, as an ``nn.Linear`` receives them; X = xᵀ);
    ``layout="CL"``: x is [Cin, L] (the paper's X ∈ R^{Cin×L}). The layout is required because a square
    input (L == Cin) would silently be read the wrong way; the input dimension is checked against Cin.
    """
    cin = weight.shape[-1]
    if weight.dim() != 2 or weight_hat.shape != weight.shape:
        raise UserError(
            f"weight {tuple(weight.shape)} and weight_hat {tuple(weight_hat.shape)} must be the same [Cout, Cin]"
        )
    if layout == "LC":
        if x.dim() < 2 or x.shape[-1] != cin:
            raise UserError(f"layout='LC' needs x [..., L, {cin}], got {tuple(x.shape)}")
        x2 = x.reshape(-1, cin)
    elif layout == "CL":
        if x.dim() != 2 or x.shape[0] != cin:
            raise UserError(f"layout='CL' needs x [{cin}, L], got {tuple(x.shape)}")
        x2 = x.t()
    else:
        raise UserError(f"layout must be 'LC' ([L, Cin]) or 'CL' ([Cin, L]), got {layout!r}")
    x2 = x2.double()
    ref = x2 @ weight.double().t()
    diff = ref - x2 @ weight_hat.double().t()
    return float(diff.square().sum() / ref.square().sum().clamp(min=1e-300))


def hessian_output_error(weight: torch.Tensor, weight_hat: torch.Tensor, hessian: torch.Tensor) -> float:
    """The same ratio on the calibration data from H = 2XXᵀ/L: tr(ΔW·H·ΔWᵀ) / tr(W·H·Wᵀ)."""
    H = hessian.double()
    W = weight.double()
    D = W - weight_hat.double()
    den = float(((W @ H) * W).sum())
    return float(((D @ H) * D).sum()) / den if den > 0 else 0.0
