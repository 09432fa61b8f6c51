"""Safety-critical experts (the paper's premise) and expert masking to test it.

Per layer, the safety-critical experts are those with the largest selection-frequency difference
f_harm(l, e) − f_benign(l, e), where f(l, e) is the fraction of prompts whose top-k set at t* in layer l
contains expert e (top-k of the raw logits = top-k of the softmax, OLMoE's ``norm_topk_prob=False`` included).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError

from .registry import _base, find_gates
from .routing import _batches, check_prompts, router_logits


@torch.no_grad()
def selection_frequency(model: Any, inputs: dict[str, torch.Tensor], batch_size: int = 64) -> torch.Tensor:
    """f(l, e): fraction of prompts routing to expert e in layer l at t* (top-k). [L, E]."""
    check_prompts(inputs)
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    z = torch.cat(
        [router_logits(model, i.to(device), m.to(device)).cpu() for _, i, m in _batches(inputs, batch_size)]
    )
    model.train(was)
    k = int(_base(model).config.num_experts_per_tok)
    return F.one_hot(z.topk(k, -1).indices, z.shape[-1]).sum(-2).float().mean(0)


def safety_critical_experts(model: Any, harmful: dict, benign: dict, top: int = 2) -> torch.Tensor:
    """The ``top`` experts per MoE layer most preferred by harmful over benign prompts. [L, top] (long)."""
    diff = selection_frequency(model, harmful) - selection_frequency(model, benign)
    if not 0 < top < diff.shape[-1]:
        raise UserError(f"top must be in 1..{diff.shape[-1] - 1}, got {top}")
    return diff.topk(top, -1).indices


@contextmanager
def mask_experts(model: Any, experts: torch.Tensor | list[list[int]]):
    """Within the block, the listed experts of each MoE layer get router logit −inf (never selected).

    ``experts`` is [L, k] in the order of the registered MoE layers. The gate's forward is replaced by the
    same top-k routing computed from the masked logits (softmax over all experts, top-k, renormalised only
    when the gate does so: ``norm_topk_prob`` for OLMoE/Qwen, always for Mixtral). The model is restored on exit.
    """
    gates = find_gates(model)
    experts = [list(map(int, row)) for row in (experts.tolist() if torch.is_tensor(experts) else experts)]
    if len(experts) != len(gates):
        raise UserError(f"experts lists {len(experts)} layers, the model has {len(gates)} MoE layers")
    model_type = _base(model).config.model_type
    handles = []
    for (_, gate), masked in zip(gates, experts, strict=True):
        if not hasattr(gate, "top_k"):
            raise UserError(f"mask_experts does not support the gate of {model_type!r} (no top_k)")
        norm = bool(getattr(gate, "norm_topk_prob", model_type == "mixtral"))

        def hook(module, args, output, masked=masked, norm=norm):
            h = args[0].reshape(-1, args[0].shape[-1])
            logits = F.linear(h, module.weight, getattr(module, "bias", None))
            logits = logits.clone()
            logits[:, masked] = float("-inf")
            probs = torch.softmax(logits.float(), dim=-1)
            top_v, top_i = torch.topk(probs, module.top_k, dim=-1)
            if norm:
                top_v = top_v / top_v.sum(-1, keepdim=True)
            if isinstance(output, tuple) and len(output) == 3:
                return logits, top_v.to(output[1].dtype), top_i
            raise UserError(f"mask_experts does not support the gate output of {model_type!r}")

        handles.append(gate.register_forward_hook(hook))
    try:
        yield model
    finally:
        for h in handles:
            h.remove()
