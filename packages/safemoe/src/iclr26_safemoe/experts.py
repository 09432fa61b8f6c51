"""Safety-critical experts (the paper's premise) and expert masking to test it.

Per layer, the safety-critical experts are those with the largest selection-frequency difference
f_harm(l, e) − f_benign(l, e), where f(l, e) is the fraction of prompts whose top-k set at t* in layer l
contains expert e (top-k of the raw logits = top-k of the softmax, OLMoE's ``norm_topk_prob=False`` included).

`mask_experts` sets the masked experts' router logits to −inf *inside each gate's own forward*, so the
architecture's own routing function (softmax → top-k for OLMoE/Qwen/Mixtral, top-k → softmax for gpt-oss,
sigmoid + bias-corrected group-limited top-k for DeepSeek-V3, softmax + group-limited top-k for DeepSeek-V2)
turns the masked logits into weights and expert indices.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

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


class _MaskRouterLinear(TorchFunctionMode):
    """Inside a gate's forward: every ``F.linear`` whose output has E columns gets −inf on the masked ones.

    The registered gates compute exactly one such linear, the router logits W·h (+ b for gpt-oss); everything
    the gate does after it (softmax, top-k, renormalisation, group limits, scaling) is its own code.
    """

    def __init__(self, masked: torch.Tensor, num_experts: int):
        super().__init__()
        self.masked, self.num_experts, self.hits = masked, num_experts, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is F.linear and torch.is_tensor(out) and out.shape[-1] == self.num_experts:
            self.hits += 1
            out = out.index_fill(-1, self.masked.to(out.device), float("-inf"))
        return out


def _masked_forward(gate: Any, forward: Any, masked: torch.Tensor, num_experts: int):
    def wrapper(*args, **kwargs):
        bias = getattr(gate, "e_score_correction_bias", None)  # DeepSeek-V3 selects on sigmoid + bias
        saved = None
        if torch.is_tensor(bias):
            saved = bias.detach().clone()
            with torch.no_grad():
                bias.index_fill_(0, masked.to(bias.device), float("-inf"))
        try:
            with _MaskRouterLinear(masked, num_experts) as mode:
                out = forward(*args, **kwargs)
            if (
                mode.hits != 1
            ):  # e.g. a registered gate computing W·h with a matmul: refuse, never mask silently
                raise UserError(
                    f"mask_experts: the gate {type(gate).__name__} computed {mode.hits} router linears "
                    "(F.linear with E outputs), expected 1"
                )
            return out
        finally:
            if saved is not None:
                with torch.no_grad():
                    bias.copy_(saved)

    return wrapper


@contextmanager
def mask_experts(model: Any, experts: torch.Tensor | list[list[int]]):
    """Within the block, the listed experts of each MoE layer get router logit −inf (never selected).

    ``experts`` is [L, k] in the order of the registered MoE layers (k may be 0: nothing masked, the same
    wrapped path, which must then reproduce the gate's own output). Each gate's own forward runs with the
    masked logits, so the weights follow the architecture's routing function
    (see the module docstring). At least top-k experts must stay unmasked. The model is restored on exit.
    """
    gates = find_gates(model)
    rows = experts.tolist() if torch.is_tensor(experts) else experts
    rows = [sorted({int(e) for e in row}) for row in rows]
    if len(rows) != len(gates):
        raise UserError(f"experts lists {len(rows)} layers, the model has {len(gates)} MoE layers")
    top_k = int(getattr(_base(model).config, "num_experts_per_tok", 1) or 1)
    patched = []
    try:
        for (layer, gate), masked in zip(gates, rows, strict=True):
            n_exp = int(gate.weight.shape[0])
            if any(not 0 <= e < n_exp for e in masked):
                raise UserError(f"layer {layer}: expert ids must be in 0..{n_exp - 1}, got {masked}")
            if n_exp - len(masked) < top_k:
                raise UserError(
                    f"layer {layer}: masking {len(masked)} of {n_exp} experts leaves < top-k={top_k}"
                )
            had = "forward" in gate.__dict__
            previous = gate.__dict__.get("forward")
            gate.forward = _masked_forward(gate, gate.forward, torch.tensor(masked, dtype=torch.long), n_exp)
            patched.append((gate, had, previous))
        yield model
    finally:
        for gate, had, previous in patched:
            if had:
                gate.forward = previous
            else:
                del gate.forward
