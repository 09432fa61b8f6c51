"""First-order (Taylor) sensitivity of each block's loss to KV quantisation error.

    s_{i,b} = mean |∂L/∂K_i ⊙ (K_i − Q_b(K_i))| + mean |∂L/∂V_i ⊙ (V_i − Q_b(V_i))|

L the LM cross-entropy of a calibration sample, K_i block i's keys after RoPE, V_i its value states, Q_b the
group quantiser at b bits; one backward pass per sample, averaged over samples. ∂L/∂K post-RoPE is read from
a calibration `Cache` whose ``update`` retains the gradients of the states it receives (`CaptureCache`), so
no model code is patched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from iclr26_core.errors import UserError

from .arch import CaptureCache, check_supported, forward_positions
from .quantizer import QUANT_BITS, check_bits, fake_quantize


def kv_gradients(
    model: Any, ids: torch.Tensor, effective_len: int | None = None
) -> tuple[float, list[tuple]]:
    """(loss, [(K, ∂L/∂K, V, ∂L/∂V) per block]) for one sample ``ids`` [B, T] at PI positions.

    No parameter gradient is computed: the parameters are frozen for the pass and the input embeddings are
    made to require grad instead, so that every K and V is on the autograd graph.
    """
    shape = check_supported(model)
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)
    handle = model.get_input_embeddings().register_forward_hook(lambda m, i, o: o.requires_grad_(True))
    cache = CaptureCache(shape.n_layers)
    try:
        with torch.enable_grad():
            out = forward_positions(model, ids, effective_len, cache=cache, labels=ids)
            out.loss.backward()
    finally:
        handle.remove()
        for p, flag in frozen:
            p.requires_grad_(flag)
    grads = []
    for layer in cache.layers:
        k, v = layer.keys, layer.values
        grads.append((k.detach(), k.grad.detach(), v.detach(), v.grad.detach()))
    return float(out.loss.detach()), grads


def kv_sensitivity(
    model: Any,
    batches: Iterable[torch.LongTensor],
    bit_choices: Sequence[int] = (16, 8, 4, 2, 1),
    effective_len: int | None = None,
    group_size: int | None = None,
) -> torch.Tensor:
    """s [n_layers, len(bit_choices)] (float64), averaged over the calibration ``batches`` ([B, T] each)."""
    shape = check_supported(model)
    bit_choices = [check_bits(b, QUANT_BITS, "bit choice") for b in bit_choices]
    sens = torch.zeros(shape.n_layers, len(bit_choices), dtype=torch.float64)
    n = 0
    was_training = model.training
    model.eval()
    try:
        for ids in batches:
            _, grads = kv_gradients(model, ids, effective_len)
            for i, (k, gk, v, gv) in enumerate(grads):
                for j, b in enumerate(bit_choices):
                    ek = (gk * (k - fake_quantize(k, b, group_size))).abs().mean()
                    ev = (gv * (v - fake_quantize(v, b, group_size))).abs().mean()
                    sens[i, j] += float(ek) + float(ev)
            n += 1
    finally:
        model.train(was_training)
    if n == 0:
        raise UserError("no calibration samples")
    return sens / n
