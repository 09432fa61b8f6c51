"""Fake quantisation of activations and of the K/V projections (the W4A4KV4 setting of the paper, Table 1).

* activations: per-token symmetric, Q(x) = clamp(round(x/s), −2^(b−1), 2^(b−1) − 1)·s with s = max|x_t|/(2^(b−1) − 1),
  applied to the input of every compressed linear layer (forward pre-hooks);
* KV: asymmetric per group of ``group`` channels (128, a head of Llama-2), s = (max − min)/(2^b − 1),
  applied to the outputs of ``k_proj`` and ``v_proj`` (forward hooks). QuaRot quantises K after RoPE with an
  online Hadamard per head; here K is quantised before RoPE, a simplification stated in the README.

Hooks are registered on the modules and listed in ``model.obr_act_hooks`` (``remove_act_quant`` takes them off).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


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


def add_act_quant(
    model: nn.Module,
    modules: Iterable[tuple[str, nn.Module]],
    act_bits: int | None = None,
    kv_bits: int | None = None,
    kv_group: int = 128,
) -> int:
    """Register the fake-quantisation hooks; returns how many were added."""
    hooks = getattr(model, "obr_act_hooks", [])
    added = 0
    for name, module in modules:
        if act_bits is not None:
            hooks.append(
                module.register_forward_pre_hook(
                    lambda _m, args, b=act_bits: (quantize_per_token(args[0], b), *args[1:])
                )
            )
            added += 1
        leaf = name.rsplit(".", 1)[-1]
        if kv_bits is not None and leaf in ("k_proj", "v_proj"):
            hooks.append(
                module.register_forward_hook(
                    lambda _m, _a, out, b=kv_bits, g=kv_group: quantize_groups_asym(out, b, g)
                )
            )
            added += 1
    model.obr_act_hooks = hooks
    return added


def remove_act_quant(model: nn.Module) -> None:
    for h in getattr(model, "obr_act_hooks", []):
        h.remove()
    model.obr_act_hooks = []
