"""Calibration with positional interpolation and the function-preserving reparameterisation of K and Q.

Per block and KV head, channel j: λ_j = (max over calibration tokens of |K_j|)^α, the max taken jointly over
the RoPE pair (j, j + r/2) (r the rotary dim: head_dim unless partial rotary) so that λ commutes with the
rotation (``rotate_half`` pairing). The keys are divided by λ and the queries multiplied by λ (repeated over each
GQA group): k_proj / q_proj rows and biases, the K / Q rows of a fused qkv_proj (Phi-3), or the k_norm / q_norm
weights of a q/k-norm model (Qwen3; there the norm weights are shared by the heads, so λ is the max over all KV
heads). QKᵀ is unchanged in full precision while key outliers move to the queries. α per block from the grid
{1, 0.95, …, 0.05} minimising the MSE of the attention module's output *after o_proj* (as the official search
does) between FP and RTN-quantised K and V (``k_bits`` / ``v_bits``), on calibration text fed at PI positions
0, s, 2s, … (s = effective_len / T), so that short calibration sees the RoPE angles of long contexts; every
block sees the FP hidden states. λ is clamped to [1e-4, 1e4].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from iclr26_core.errors import UserError

from .arch import attention_modules, capture_qkv, check_supported, scale_queries_keys
from .quantizer import fake_quantize

LAMBDA_RANGE = (1e-4, 1e4)


def alpha_grid(n: int = 20) -> list[float]:
    """{1, 1 − 1/n, …, 1/n}: the paper's 20 values 1, 0.95, …, 0.05 for n = 20."""
    return [round(1 - k / n, 10) for k in range(n)]


def pair_max(absmax: torch.Tensor, rotary_dim: int | None = None) -> torch.Tensor:
    """max(|K_j|, |K_{j+r/2}|) written back to both channels of each RoPE pair (j < r/2, r = ``rotary_dim``,
    default all channels); channels beyond r (not rotated) keep their own max: [..., D] → [..., D]."""
    r = absmax.shape[-1] if rotary_dim is None else int(rotary_dim)
    half = r // 2
    m = torch.maximum(absmax[..., :half], absmax[..., half:r])
    return torch.cat([m, m, absmax[..., r:]], dim=-1)


def lambdas(absmax: torch.Tensor, alpha: float, rotary_dim: int | None = None) -> torch.Tensor:
    return pair_max(absmax, rotary_dim).clamp_min(1e-12).pow(alpha).clamp(*LAMBDA_RANGE)


def o_proj_output(attn: Any, out: torch.Tensor) -> torch.Tensor:
    """The attention module's output: o_proj of the heads [B, Hq, T, D] → [B, T, hidden]."""
    return attn.o_proj(out.transpose(1, 2).flatten(-2))


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
        """Divide the keys by λ and multiply the queries by λ (projection rows/biases or q/k-norm weights), in
        place; returns the model."""
        shape = check_supported(model)
        mods = attention_modules(model)
        if len(mods) != len(self.lambdas):
            raise UserError(f"rep scales are for {len(self.lambdas)} blocks, the model has {len(mods)}")
        for attn, lam in zip(mods, self.lambdas):
            if list(lam.shape) != [shape.n_kv_heads, shape.head_dim]:
                raise UserError(
                    f"rep scales of shape {list(lam.shape)} do not fit "
                    f"{shape.n_kv_heads} KV heads x head_dim {shape.head_dim}"
                )
            scale_queries_keys(attn, shape, lam)
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
    if shape.qk_norm:  # one λ for all heads: the norm weights are shared
        absmax = [m.amax(0, keepdim=True).expand_as(m).contiguous() for m in absmax]
    alphas = alpha_grid(grid)
    err = [dict.fromkeys(alphas, 0.0) for _ in range(shape.n_layers)]
    group = shape.n_heads // shape.n_kv_heads
    mods = attention_modules(model)
    with torch.no_grad():
        for ids in batches:
            for i, (q, k, v) in enumerate(capture_qkv(model, ids, effective_len)):
                ref = o_proj_output(mods[i], attention_output(q, k, v, shape.scaling))
                vq = fake_quantize(v, v_bits, group_size)
                for a in alphas:
                    lam = lambdas(absmax[i], a, shape.rotary_dim)[None, :, None, :]  # [1, Hkv, 1, D]
                    kq = fake_quantize(k / lam, k_bits, group_size)
                    qs = q * lam.repeat_interleave(group, 1)
                    out = o_proj_output(mods[i], attention_output(qs, kq, vq, shape.scaling))
                    err[i][a] += float((out - ref).square().mean()) / len(batches)
    best = [min(e, key=e.get) for e in err]
    lams = [lambdas(m, a, shape.rotary_dim) for m, a in zip(absmax, best)]
    return RepScales(lams, best, effective_len, err)
