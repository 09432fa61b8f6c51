"""Calibration with positional interpolation and the function-preserving reparameterisation of K and Q.

Per block and KV head, channel j: λ_j = (max over calibration tokens of |K_j|)^α, the max taken jointly over
the RoPE pair (j, j + d/2) so that λ commutes with the rotation (``rotate_half`` pairing). k_proj rows (and
bias) are divided by λ, q_proj rows (and bias) multiplied by λ, repeated over each GQA group: QKᵀ is unchanged
in full precision while key outliers move to the queries. α per block from the grid {1, 0.95, …, 0.05}
minimising the MSE between the FP attention output and the one with RTN-quantised K and V (``k_bits`` /
``v_bits``), on calibration text fed at PI positions 0, s, 2s, … (s = effective_len / T), so that short
calibration sees the RoPE angles of long contexts. λ is clamped to [1e-4, 1e4].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from iclr26_core.errors import UserError

from .arch import attention_modules, capture_qkv, check_supported
from .quantizer import fake_quantize

LAMBDA_RANGE = (1e-4, 1e4)


def alpha_grid(n: int = 20) -> list[float]:
    """{1, 1 − 1/n, …, 1/n}: the paper's 20 values 1, 0.95, …, 0.05 for n = 20."""
    return [round(1 - k / n, 10) for k in range(n)]


def pair_max(absmax: torch.Tensor) -> torch.Tensor:
    """max(|K_j|, |K_{j+d/2}|) written back to both channels of each RoPE pair: [..., D] → [..., D]."""
    half = absmax.shape[-1] // 2
    m = torch.maximum(absmax[..., :half], absmax[..., half:])
    return torch.cat([m, m], dim=-1)


def lambdas(absmax: torch.Tensor, alpha: float) -> torch.Tensor:
    return pair_max(absmax).clamp_min(1e-12).pow(alpha).clamp(*LAMBDA_RANGE)


def attention_output(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor:
    """Causal softmax(QKᵀ·scaling)V with GQA: q [B,Hq,T,D], k/v [B,Hkv,T,D] → [B,Hq,T,D]."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling)


@dataclass
class RepScales:
    """λ per block [n_kv_heads, head_dim], the chosen α per block, and how they were calibrated."""

    lambdas: list[torch.Tensor]
    alphas: list[float]
    effective_len: int | None = None
    mse: list[dict[float, float]] = field(default_factory=list)  # per block: α → attention-output MSE

    def apply(self, model: Any) -> Any:
        """Divide k_proj rows/bias by λ and multiply q_proj rows/bias by λ, in place; returns the model."""
        shape = check_supported(model)
        mods = attention_modules(model)
        if len(mods) != len(self.lambdas):
            raise UserError(f"rep scales are for {len(self.lambdas)} blocks, the model has {len(mods)}")
        group = shape.n_heads // shape.n_kv_heads
        with torch.no_grad():
            for attn, lam in zip(mods, self.lambdas):
                if list(lam.shape) != [shape.n_kv_heads, shape.head_dim]:
                    raise UserError(
                        f"rep scales of shape {list(lam.shape)} do not fit "
                        f"{shape.n_kv_heads} KV heads x head_dim {shape.head_dim}"
                    )
                k_scale = lam.reshape(-1).to(attn.k_proj.weight)
                q_scale = lam.repeat_interleave(group, 0).reshape(-1).to(attn.q_proj.weight)
                attn.k_proj.weight.div_(k_scale[:, None])
                attn.q_proj.weight.mul_(q_scale[:, None])
                if attn.k_proj.bias is not None:
                    attn.k_proj.bias.div_(k_scale)
                if attn.q_proj.bias is not None:
                    attn.q_proj.bias.mul_(q_scale)
        return model

    def save(self, path: str | Path) -> None:
        """safetensors: ``lambdas`` [n_layers, n_kv_heads, head_dim], ``alphas`` [n_layers] (atomic write)."""
        from safetensors.torch import save_file

        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        meta = {"effective_len": str(self.effective_len or 0)}
        tensors = {
            "lambdas": torch.stack([lam.float().cpu() for lam in self.lambdas]).contiguous(),
            "alphas": torch.tensor(self.alphas, dtype=torch.float64),
        }
        try:
            save_file(tensors, str(tmp), metadata=meta)
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: str | Path) -> RepScales:
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="pt") as f:
                lam, alphas = f.get_tensor("lambdas"), f.get_tensor("alphas")
                eff = int((f.metadata() or {}).get("effective_len", "0")) or None
        except (SafetensorError, OSError, KeyError) as exc:
            raise UserError(f"cannot read rep scales {str(path)!r} ({exc})") from None
        return cls(list(lam.unbind(0)), [float(a) for a in alphas], eff)


def key_absmax(model: Any, batches: list[torch.Tensor], effective_len: int | None) -> list[torch.Tensor]:
    """Per block: max over calibration tokens of |K| post-RoPE, [n_kv_heads, head_dim]."""
    out: list[torch.Tensor] | None = None
    for ids in batches:
        qkv = capture_qkv(model, ids, effective_len)
        m = [k.abs().amax(dim=(0, 2)) for _, k, _ in qkv]
        out = m if out is None else [torch.maximum(a, b) for a, b in zip(out, m)]
    if out is None:
        raise UserError("no calibration samples")
    return out


def calibrate_reparameterization(
    model: Any,
    batches: Iterable[torch.LongTensor],
    *,
    effective_len: int | None = 8192,
    k_bits: int = 4,
    v_bits: int = 4,
    grid: int = 20,
    group_size: int | None = None,
) -> RepScales:
    """λ and α per block from calibration ``batches`` ([B, T] token ids) at PI positions (the model is unchanged)."""
    shape = check_supported(model)
    batches = list(batches)
    absmax = key_absmax(model, batches, effective_len)
    alphas = alpha_grid(grid)
    err = [dict.fromkeys(alphas, 0.0) for _ in range(shape.n_layers)]
    group = shape.n_heads // shape.n_kv_heads
    for ids in batches:
        for i, (q, k, v) in enumerate(capture_qkv(model, ids, effective_len)):
            ref = attention_output(q, k, v, shape.scaling)
            vq = fake_quantize(v, v_bits, group_size)
            for a in alphas:
                lam = lambdas(absmax[i], a)[None, :, None, :]  # [1, Hkv, 1, D]
                kq = fake_quantize(k / lam, k_bits, group_size)
                qs = q * lam.repeat_interleave(group, 1)
                out = attention_output(qs, kq, vq, shape.scaling)
                err[i][a] += float((out - ref).square().mean()) / len(batches)
    best = [min(e, key=e.get) for e in err]
    return RepScales([lambdas(m, a) for m, a in zip(absmax, best)], best, effective_len, err)
