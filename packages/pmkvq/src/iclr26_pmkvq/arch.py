"""What PM-KVQ needs to know about a model: supported architectures, KV shapes, positional interpolation,
and a calibration `Cache` that hands out the post-RoPE keys/values (and their gradients).

Supported: Llama, Qwen2, Mistral (`transformers` decoder layers ``model.model.layers[i].self_attn`` with
``q_proj``/``k_proj``/``v_proj`` and RoPE applied with ``rotate_half``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from iclr26_core.errors import UserError

SUPPORTED = ("llama", "qwen2", "mistral")


class UnsupportedModel(UserError):
    """The model is not a Llama, Qwen2 or Mistral causal LM."""


@dataclass(frozen=True)
class KVShape:
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    scaling: float


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
    return KVShape(int(cfg.num_hidden_layers), heads, kv, head_dim, head_dim**-0.5)


def attention_modules(model: Any) -> list[Any]:
    check_supported(model)
    return [layer.self_attn for layer in model.model.layers]


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
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

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
            q = attn.q_proj(h).view(*h.shape[:-1], -1, shape.head_dim).transpose(1, 2)
            q, _ = apply_rotary_pos_emb(q, q, cos, sin)
        out.append((q, cache.layers[i].keys.detach(), cache.layers[i].values.detach()))
    return out
