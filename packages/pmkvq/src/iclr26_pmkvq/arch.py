"""What PM-KVQ needs to know about a model: supported architectures, KV shapes, positional interpolation,
and a calibration `Cache` that hands out the post-RoPE keys/values (and their gradients).

Supported (`transformers` decoder layers ``model.model.layers[i].self_attn``, RoPE with ``rotate_half``):
Llama, Qwen2, Mistral (``q_proj``/``k_proj``/``v_proj``), Phi-3 (one fused ``qkv_proj`` whose rows are
[Q | K | V], optionally partial rotary) and Qwen3 (per-head RMS ``q_norm``/``k_norm`` after the projections,
whose weights are shared by all heads). The cache itself works on any model; these families are what the
calibration (queries, reparameterisation) needs to know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from iclr26_core.errors import UserError

SUPPORTED = ("llama", "qwen2", "mistral", "phi3", "qwen3")


class UnsupportedModel(UserError):
    """The model is not a Llama, Qwen2, Mistral, Phi-3 or Qwen3 causal LM."""


@dataclass(frozen=True)
class KVShape:
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    scaling: float
    rotary_dim: int = (
        0  # channels rotated by RoPE (head_dim unless partial rotary); pairs (j, j + rotary_dim/2)
    )
    fused_qkv: bool = False  # Phi-3: one qkv_proj
    qk_norm: bool = False  # Qwen3: q_norm / k_norm (weights over head_dim, shared by the heads)


def check_supported(model: Any) -> KVShape:
    """The KV shape of a supported model; `UnsupportedModel` (one line) otherwise."""
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in SUPPORTED:
        raise UnsupportedModel(
            f"PM-KVQ supports {', '.join(SUPPORTED)} models (RoPE with rotate_half); got {kind or type(model).__name__!r}"
        )
    heads = int(cfg.num_attention_heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    kv = int(getattr(cfg, "num_key_value_heads", None) or heads)
    rot = int(head_dim * float(getattr(cfg, "partial_rotary_factor", None) or 1.0))
    rot -= rot % 2
    return KVShape(
        int(cfg.num_hidden_layers), heads, kv, head_dim, head_dim**-0.5, rot, kind == "phi3", kind == "qwen3"
    )


def attention_modules(model: Any) -> list[Any]:
    check_supported(model)
    return [layer.self_attn for layer in model.model.layers]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE with ``rotate_half`` on the first cos.shape[-1] channels (partial rotary), x [B, H, T, D]."""
    rot = cos.shape[-1]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = torch.cat([-x_rot[..., half:], x_rot[..., :half]], dim=-1)
    return torch.cat([x_rot * cos + rotated * sin, x_pass], dim=-1)


def project_queries(attn: Any, h: torch.Tensor, shape: KVShape) -> torch.Tensor:
    """Pre-RoPE queries [B, Hq, T, D] of one attention module for hidden states h [B, T, hidden]."""
    width = shape.n_heads * shape.head_dim
    q = attn.qkv_proj(h)[..., :width] if shape.fused_qkv else attn.q_proj(h)
    q = q.view(*h.shape[:-1], -1, shape.head_dim)
    if shape.qk_norm:
        q = attn.q_norm(q)
    return q.transpose(1, 2)


@torch.no_grad()
def scale_queries_keys(attn: Any, shape: KVShape, lam: torch.Tensor) -> None:
    """Multiply the queries and divide the keys of one attention module by λ [n_kv_heads, head_dim] (repeated
    over each GQA group), in place: QKᵀ is unchanged when λ is tied over RoPE pairs."""
    group = shape.n_heads // shape.n_kv_heads
    if shape.qk_norm:
        if not torch.equal(lam, lam[:1].expand_as(lam)):
            raise UserError(
                "a q/k-norm model shares its norm weights over heads: λ must be equal for all heads"
            )
        attn.q_norm.weight.mul_(lam[0].to(attn.q_norm.weight))
        attn.k_norm.weight.div_(lam[0].to(attn.k_norm.weight))
        return
    q_scale = lam.repeat_interleave(group, 0).reshape(-1)
    k_scale = lam.reshape(-1)
    if shape.fused_qkv:
        nq, nk = q_scale.numel(), k_scale.numel()
        rows = torch.ones(attn.qkv_proj.weight.shape[0], dtype=lam.dtype, device=lam.device)
        rows[:nq], rows[nq : nq + nk] = q_scale, 1.0 / k_scale
        targets = [(attn.qkv_proj, rows)]
    else:
        targets = [(attn.q_proj, q_scale), (attn.k_proj, 1.0 / k_scale)]
    for proj, factor in targets:
        proj.weight.mul_(factor.to(proj.weight)[:, None])
        if proj.bias is not None:
            proj.bias.mul_(factor.to(proj.bias))


def pi_stride(length: int, effective_len: int | None) -> int:
    """The positional-interpolation stride s = effective_len / T (an integer ≥ 1; 1 without PI)."""
    if effective_len is None or effective_len <= length:
        return 1
    return int(effective_len) // int(length)


def pi_position_ids(length: int, effective_len: int | None, batch: int = 1) -> torch.LongTensor:
    """Position ids 0, s, 2s, …, (T−1)s with s = effective_len // T: [batch, T]."""
    s = pi_stride(length, effective_len)
    return (torch.arange(length, dtype=torch.long) * s).expand(batch, -1)


class _CaptureLayer(DynamicLayer):
    """Keeps this forward's post-RoPE key/value states (retaining their gradients) and returns them unchanged."""

    def update(self, key_states, value_states, *args, **kwargs):
        if key_states.requires_grad:
            key_states.retain_grad()
            value_states.retain_grad()
        self.keys, self.values = key_states, value_states
        self.is_initialized = True
        return key_states, value_states

    def get_seq_length(self) -> int:
        return 0  # one forward from position 0: nothing cached before it


class CaptureCache(Cache):
    """A calibration cache: ``.layers[i].keys`` / ``.values`` are block i's post-RoPE K and V (with ``.grad``)."""

    def __init__(self, n_layers: int) -> None:
        super().__init__(layers=[_CaptureLayer() for _ in range(n_layers)])


def forward_positions(
    model: Any, ids: torch.Tensor, effective_len: int | None = None, cache: Any = None, **kwargs: Any
):
    """One forward of ``ids`` [B, T] at the PI positions of ``effective_len`` (an explicit attention mask keeps
    transformers from reading the strided position ids as packed sequences)."""
    from .decoding import cache_kwarg

    pos = pi_position_ids(ids.shape[1], effective_len, ids.shape[0]).to(ids.device)
    extra = {} if cache is None else {cache_kwarg(model): cache, "use_cache": True}
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos, **extra, **kwargs)


def capture_qkv(model: Any, ids: torch.Tensor, effective_len: int | None = None) -> list[tuple]:
    """Post-RoPE (Q, K, V) of every block for one forward at PI positions: [(q [B,Hq,T,D], k, v [B,Hkv,T,D])]."""
    shape = check_supported(model)
    inputs: dict[int, tuple] = {}

    def hook(i):
        def fn(module, args, kwargs):
            h = kwargs.get("hidden_states", args[0] if args else None)
            inputs[i] = (h, kwargs.get("position_embeddings"))

        return fn

    handles = [
        m.register_forward_pre_hook(hook(i), with_kwargs=True) for i, m in enumerate(attention_modules(model))
    ]
    cache = CaptureCache(shape.n_layers)
    try:
        with torch.no_grad():
            forward_positions(model, ids, effective_len, cache=cache)
    finally:
        for h in handles:
            h.remove()
    out = []
    for i, attn in enumerate(attention_modules(model)):
        h, (cos, sin) = inputs[i]
        with torch.no_grad():
            q = apply_rope(project_queries(attn, h, shape), cos, sin)
        out.append((q, cache.layers[i].keys.detach(), cache.layers[i].values.detach()))
    return out
