"""Teacher-forced decoding with a cache, KL against the full-precision model, greedy agreement.

The FP reference of a text is one causal forward over all its tokens (what a FP cache gives at every step).
A quantised cache is run as decoding runs: one token per forward (after an optional prefill), so every
logit sees the cache as it stands at that step. `flush_aligned_logits` gives the same logits far faster: a cache
changes its stored (quantised) part only when its full-precision window/residual fills, and between two such
flushes a decoding step attends to [stored part, window in FP, itself in FP], which is exactly what one forward
of all the tokens up to the next flush sees. Feeding the tokens in chunks that end at the flush points is
therefore step-by-step decoding, computed in a few forwards (tested against the one-token loop).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch


def cache_kwarg(model: Any) -> str:
    """The name under which this transformers version takes a cache: ``cache`` (>= 5.2x) or ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@torch.no_grad()
def fp_logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """Logits [B, L, V] (float32) of one causal forward without a cache."""
    return model(input_ids=ids, use_cache=False).logits.float()


@torch.no_grad()
def teacher_forced_logits(
    model: Any, ids: torch.Tensor, cache: Any, prefill: int = 0, progress: Callable | None = None
) -> torch.Tensor:
    """Logits [B, L, V] (float32) feeding ``ids`` through ``cache``: ``prefill`` tokens at once, then one per step."""
    key = cache_kwarg(model)
    out = []
    steps = [(0, prefill)] if prefill > 0 else []
    steps += [(t, t + 1) for t in range(prefill, ids.shape[1])]
    for a, b in progress(steps) if progress else steps:
        logits = model(input_ids=ids[:, a:b], use_cache=True, **{key: cache}).logits
        out.append(logits.float())
    return torch.cat(out, dim=1)


def tokens_to_flush(cache: Any) -> int | None:
    """Tokens the next forward may take without crossing a change of the cache's stored part (None: any)."""
    if type(cache).__name__ == "DynamicCache":
        return None
    layers = getattr(cache, "layers", None) or []
    layer = layers[0] if layers else None
    if layer is None or not getattr(layer, "is_initialized", False):
        return 1  # the first token of a decoding from scratch
    if hasattr(layer, "win_k"):  # our ProgressiveLayer / KIVILayer: sink first, then the window
        if layer.sink_k.shape[-2] < layer.n_sink:
            return 1
        return max(1, layer.window - layer.win_k.shape[-2]) if layer.window > 0 else 1
    if hasattr(
        layer, "residual_length"
    ):  # transformers' QuantizedLayer: re-quantises when the residual fills
        held = layer.keys.shape[-2] if layer.keys.dim() == 4 else 0
        return max(1, layer.residual_length - held)
    raise TypeError(f"no flush rule known for {type(cache).__name__}: use teacher_forced_logits")


@torch.no_grad()
def flush_aligned_logits(
    model: Any, ids: torch.Tensor, cache: Any, prefill: int = 0, progress: Callable | None = None
) -> torch.Tensor:
    """The logits of `teacher_forced_logits` (``prefill`` at once, then decoding), in forwards that end at the
    cache's flush points (`tokens_to_flush`): [B, L, V] float32."""
    key = cache_kwarg(model)
    out, t, n = [], 0, ids.shape[1]
    bar = progress(range(n)) if progress else None
    while t < n:
        step = prefill if (t == 0 and prefill > 0) else (tokens_to_flush(cache) or n - t)
        b = min(n, t + step)
        out.append(model(input_ids=ids[:, t:b], use_cache=True, **{key: cache}).logits.float())
        if bar is not None:
            bar.update(b - t)
        t = b
    if bar is not None:
        bar.close()
    return torch.cat(out, dim=1)


def kl_per_step(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(P_ref ‖ P) per position, mean over the batch: [L]."""
    ref = torch.log_softmax(ref_logits.double(), -1)
    q = torch.log_softmax(logits.double(), -1)
    return (ref.exp() * (ref - q)).sum(-1).mean(0)


@torch.no_grad()
def greedy(model: Any, prompt: torch.Tensor, new_tokens: int, cache: Any = None) -> torch.Tensor:
    """``model.generate`` greedy continuation of ``prompt`` [B, P] with ``cache`` (None: the default FP cache)."""
    kw = {} if cache is None else {cache_kwarg(model): cache}
    out = model.generate(
        input_ids=prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        pad_token_id=model.config.pad_token_id if model.config.pad_token_id is not None else 0,
        **kw,
    )
    return out[:, prompt.shape[1] :]


def agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Fraction of positions where two continuations agree, up to the first divergence counted per position."""
    n = min(a.shape[1], b.shape[1])
    return float((a[:, :n] == b[:, :n]).double().mean())
