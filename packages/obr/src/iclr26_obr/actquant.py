"""Fake quantisation of activations and of the KV cache (the W4A4KV4 setting of the paper, Table 1).

As the official code (QuaRot's ``main.py``: ``ActQuantWrapper`` and ``QKRotationWrapper``) runs it:

* activations: per-token symmetric, Q(x) = clamp(round(x/s), −2^(b−1), 2^(b−1) − 1)·s with s = max|x_t|/(2^(b−1) − 1),
  applied to the input of every compressed linear layer (forward pre-hooks, after the online Hadamards of
  `rotation`, which were registered first);
* K: after RoPE, each head's queries and keys are rotated by a Hadamard of the head size (q·kᵀ is unchanged),
  then K is quantised asymmetrically per token and head (a group of head-size channels);
* V: quantised the same way per token and head (QuaRot's v_proj output quantiser with groups of the head size).

K and V are quantised inside the attention call: `add_kv_quant` registers an attention function
``obr_kv_<inner>`` with ``transformers``' ``AttentionInterface`` (and the matching mask function) that rotates,
quantises and hands over to the model's own implementation (``sdpa`` or ``eager``); it sets it on the model's
config. Hooks are listed in ``model.obr_act_hooks``; ``remove_act_quant`` takes everything off.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import torch
from torch import nn

from iclr26_core.errors import UserError

KV_PREFIX = "obr_kv_"
INNER = ("sdpa", "eager")


def quantize_per_token(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Symmetric per-token (last dimension) fake quantisation."""
    maxq = 2 ** (bits - 1) - 1
    s = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / maxq
    return torch.clamp(torch.round(x / s), -maxq - 1, maxq) * s


def quantize_groups_asym(x: torch.Tensor, bits: int, group: int = 128) -> torch.Tensor:
    """Asymmetric fake quantisation per group of ``group`` consecutive channels of the last dimension."""
    d = x.shape[-1]
    g = group if d % group == 0 else d
    xs = x.reshape(*x.shape[:-1], d // g, g)
    lo, hi = xs.amin(-1, keepdim=True), xs.amax(-1, keepdim=True)
    maxq = 2**bits - 1
    s = ((hi - lo) / maxq).clamp(min=1e-8)
    z = torch.round(-lo / s)
    q = torch.clamp(torch.round(xs / s) + z, 0, maxq)
    return ((q - z) * s).reshape(x.shape)


def _inner_attention(module: nn.Module, inner: str):
    if inner == "eager":  # each modeling file defines its own eager function
        return sys.modules[type(module).__module__].eager_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return ALL_ATTENTION_FUNCTIONS[inner]


def _kv_attention(module: nn.Module, query, key, value, attention_mask, **kwargs):
    """Per-head Hadamard on q and k after RoPE, K/V fake-quantised per token and head, then the inner attention."""
    inner = module.config._attn_implementation.removeprefix(KV_PREFIX)
    H = getattr(module, "obr_qk_hadamard", None)
    if H is not None:
        H = H.to(query.dtype)
        query, key = query @ H, key @ H
    bits = getattr(module, "obr_kv_bits", None)
    if bits is not None:
        key = quantize_groups_asym(key, bits, key.shape[-1])
        value = quantize_groups_asym(value, bits, value.shape[-1])
    return _inner_attention(module, inner)(module, query, key, value, attention_mask, **kwargs)


def _register(inner: str) -> str:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    name = KV_PREFIX + inner
    AttentionInterface.register(name, _kv_attention)
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[inner])
    return name


def check_kv_quant(model: nn.Module) -> tuple[str, list[nn.Module]]:
    """(inner attention implementation, attention modules) or a `UserError` when KV quantisation cannot apply."""
    from .hadamard import has_hadamard
    from .rotation import FAMILIES, head_dims

    config = model.config
    if getattr(config, "model_type", None) not in FAMILIES:
        raise UserError(
            f"KV quantisation supports the Llama family ({', '.join(FAMILIES)}), not {config.model_type}"
        )
    inner = str(config._attn_implementation or "eager").removeprefix(KV_PREFIX)
    if inner not in INNER:
        raise UserError(f"KV quantisation needs sdpa or eager attention, the model uses {inner!r}")
    hd = head_dims(config)[2]
    if not has_hadamard(hd):
        raise UserError(f"no Hadamard matrix for the head size {hd} (needed to rotate K after RoPE)")
    return inner, [m for m in model.modules() if hasattr(m, "o_proj") and hasattr(m, "config")]


def add_kv_quant(model: nn.Module, kv_bits: int | None, *, qk_hadamard: bool = True) -> int:
    """Quantise K (after RoPE, per-head Hadamard first) and V to ``kv_bits``; returns the attention modules done.

    ``kv_bits=None`` with ``qk_hadamard=True`` rotates q and k only (the logits do not change).
    """
    from .rotation import head_dims, orthonormal_hadamard

    config = model.config
    inner, attns = check_kv_quant(model)
    hd = head_dims(config)[2]
    H = orthonormal_hadamard(hd).to(device=next(model.parameters()).device) if qk_hadamard else None
    for att in attns:
        att.obr_kv_bits = kv_bits
        if H is not None:
            att.register_buffer("obr_qk_hadamard", H.to(att.o_proj.weight.dtype), persistent=False)
    config._attn_implementation = _register(inner)
    model.obr_kv = {"bits": kv_bits, "qk_hadamard": qk_hadamard, "inner": inner}
    return len(attns)


def add_act_quant(
    model: nn.Module,
    modules: Iterable[tuple[str, nn.Module]],
    act_bits: int | None = None,
    kv_bits: int | None = None,
) -> int:
    """Per-token input quantisation of ``modules`` and (``kv_bits``) the KV path; returns the hooks added."""
    hooks = getattr(model, "obr_act_hooks", [])
    added = 0
    if act_bits is not None:
        for _, module in modules:
            hooks.append(
                module.register_forward_pre_hook(
                    lambda _m, args, b=act_bits: (quantize_per_token(args[0], b), *args[1:])
                )
            )
            added += 1
    model.obr_act_hooks = hooks
    if kv_bits is not None:
        add_kv_quant(model, kv_bits)
    return added


def remove_act_quant(model: nn.Module) -> None:
    """Take the activation hooks and the KV attention wrapper off (the online Hadamards of `rotation` stay)."""
    for h in getattr(model, "obr_act_hooks", []):
        h.remove()
    model.obr_act_hooks = []
    kv = getattr(model, "obr_kv", None)
    if kv is not None:
        model.config._attn_implementation = kv["inner"]
        for m in model.modules():
            if hasattr(m, "obr_kv_bits"):
                del m.obr_kv_bits
                if hasattr(m, "obr_qk_hadamard"):
                    delattr(m, "obr_qk_hadamard")
        del model.obr_kv
