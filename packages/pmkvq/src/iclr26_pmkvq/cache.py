"""PM-KVQ's progressive KV cache and the fixed-bit KIVI-style baseline, as real `transformers` caches.

Per block i (one `ProgressiveLayer`): the first ``n_sink`` tokens stay in full precision for ever; the most
recent tokens wait in a full-precision window; when the window holds ``window`` tokens it is quantised at the
block's current bit-width N and appended to the main cache (the residual semantics of KIVI and of
transformers' ``QuantizedCache``). After every append, while bytes(main) > budget_i · batch, the whole main
cache is shrunk 16 → 8 → 4 → 2 with the equivalent right shift; below ``min_bits`` a `KVBudgetError` is
raised (never a silent eviction). A long prompt follows the same rules in one step, which ends at the highest
N that fits. Budgets are per sequence; bytes(main) counts codes + float16 ranges + float16 zeros
(``count_scales=False``: codes only, the official accounting). Sink and window are a constant overhead,
identical for every method compared, reported separately (`overhead_bytes`, 2 bytes per element).

Quantisation is for storage only: the attention of a forward sees [sink, dequantised main, window] *as the
cache held them before this forward* plus the forward's own key/value states in full precision; the new tokens
are stored (and flushed, quantised, shrunk) afterwards. This is what the official PM-KVQ attention and
transformers' ``QuantizedCache`` do, and it makes a prefill give the full-precision logits. The main cache is
dequantised again at every step (what a CPU or a non-fused GPU path pays: O(length) work per step).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from iclr26_core.errors import UserError

from .quantizer import (
    CACHE_BITS,
    FP16_BYTES,
    QuantizedGroups,
    check_bits,
    quantize_groups,
    resolve_group_size,
)


class KVBudgetError(UserError):
    """A block's KV cache does not fit its budget even at ``min_bits``."""

    def __init__(self, layer: int, needed: int, budget: float, bits: int, tokens: int) -> None:
        self.layer, self.needed, self.budget = layer, needed, budget
        super().__init__(
            f"KV budget exceeded in block {layer}: {tokens} cached tokens need {needed} bytes at {bits} bit, "
            f"the budget is {int(budget)} bytes (raise the budget, lower max_len or allow fewer bits)"
        )


def mem_bytes(
    bits: int,
    tokens: int,
    n_kv_heads: int,
    head_dim: int,
    group_size: int | None = None,
    count_scales: bool = True,
) -> int:
    """Mem(b) = tokens · 2 (K and V) · n_kv_heads · [head_dim·b/8 + (head_dim/g)·4] bytes (one sequence).

    ``count_scales=False``: the paper's b·d_kv·2·tokens/8 (codes only). Codes are packed per token and head, so
    head_dim·b/8 is rounded up to whole bytes.
    """
    g = resolve_group_size(head_dim, group_size)
    per_head = math.ceil(head_dim * bits / 8) + (2 * FP16_BYTES * head_dim // g if count_scales else 0)
    return tokens * 2 * n_kv_heads * per_head


class ProgressiveLayer(DynamicLayer):
    """One block's cache: FP sink, main cache at ``bits`` (shrunk by ERS to fit ``budget``), FP window."""

    is_croppable = False

    def __init__(
        self,
        budget: float,
        *,
        layer_idx: int = 0,
        init_bits: int = 16,
        min_bits: int = 2,
        n_sink: int = 1,
        window: int = 128,
        group_size: int | None = None,
        count_scales: bool = True,
    ) -> None:
        super().__init__()
        self.budget = float(budget)
        self.layer_idx = layer_idx
        self.init_bits = self.bits = check_bits(init_bits, CACHE_BITS, "init_bits")
        self.min_bits = check_bits(min_bits, CACHE_BITS, "min_bits")
        if self.min_bits > self.init_bits:
            raise UserError(f"min_bits {min_bits} is above init_bits {init_bits}")
        if n_sink < 0 or window < 0:
            raise UserError(f"n_sink and window must be >= 0, got {n_sink} and {window}")
        self.n_sink, self.window, self.count_scales = int(n_sink), int(window), bool(count_scales)
        self.group_size_arg = group_size
        self.cumulative_length = 0
        self.trace: list[tuple[int, int, int]] = []  # (cached tokens, bits, bytes of main) after each update
        self._clear()

    def _clear(self) -> None:
        self.sink_k = self.sink_v = self.win_k = self.win_v = None
        self.main_k: QuantizedGroups | None = None
        self.main_v: QuantizedGroups | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device, self.dtype = key_states.device, key_states.dtype
        self.group_size = resolve_group_size(key_states.shape[-1], self.group_size_arg)
        empty = key_states[..., :0, :]
        self.sink_k, self.sink_v = empty, value_states[..., :0, :]
        self.win_k, self.win_v = empty, value_states[..., :0, :]
        self.keys = self.values = empty
        self.is_initialized = True

    # ------------------------------------------------------------------------------------------- accounting
    def main_bytes(self) -> int:
        if self.main_k is None:
            return 0
        parts = (self.main_k, self.main_v)
        return sum(p.nbytes if self.count_scales else p.code_bytes for p in parts)

    def overhead_bytes(self) -> int:
        """Sink + window at 16 bit (2 bytes per element)."""
        if not self.is_initialized:
            return 0
        return sum(t.numel() * FP16_BYTES for t in (self.sink_k, self.sink_v, self.win_k, self.win_v))

    def main_tokens(self) -> int:
        return 0 if self.main_v is None else self.main_v.packed.shape[-2]

    # ------------------------------------------------------------- layout of the keys (KIVI overrides these)
    key_cat_dim = -2  # the dim of the stored key groups along which flushed chunks are concatenated

    def _quantize_keys(self, k: torch.Tensor) -> QuantizedGroups:
        """Keys [B, H, T, D] -> groups of ``group_size`` channels per token and head (the PM-KVQ layout)."""
        return quantize_groups(k, self.bits, self.group_size)

    def _dequantize_keys(self, q: QuantizedGroups) -> torch.Tensor:
        return q.dequantize(self.dtype)

    # ----------------------------------------------------------------------------------------------- update
    def _append_main(self, k: torch.Tensor, v: torch.Tensor) -> None:
        qk = self._quantize_keys(k)
        qv = quantize_groups(v, self.bits, self.group_size)
        if self.main_k is None:
            self.main_k, self.main_v = qk, qv
        else:
            self.main_k = QuantizedGroups.cat([self.main_k, qk], self.key_cat_dim)
            self.main_v = QuantizedGroups.cat([self.main_v, qv])
        limit = self.budget * k.shape[0]
        while self.main_bytes() > limit:
            if self.bits // 2 < self.min_bits:
                raise KVBudgetError(self.layer_idx, self.main_bytes(), limit, self.bits, self.main_tokens())
            self.main_k, self.main_v = self.main_k.shrink(), self.main_v.shrink()
            self.bits //= 2

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        # what this forward attends to: the cache as it stood, plus its own tokens in full precision
        past_k, past_v = self.states()
        out = torch.cat([past_k, key_states], dim=-2), torch.cat([past_v, value_states], dim=-2)
        self.cumulative_length += key_states.shape[-2]
        take = min(self.n_sink - self.sink_k.shape[-2], key_states.shape[-2])
        if take > 0:
            self.sink_k = torch.cat([self.sink_k, key_states[..., :take, :]], dim=-2)
            self.sink_v = torch.cat([self.sink_v, value_states[..., :take, :]], dim=-2)
            key_states, value_states = key_states[..., take:, :], value_states[..., take:, :]
        self.win_k = torch.cat([self.win_k, key_states], dim=-2)
        self.win_v = torch.cat([self.win_v, value_states], dim=-2)
        n = self.win_k.shape[-2]
        flush = n if self.window == 0 else (n // self.window) * self.window
        if flush > 0:
            self._append_main(self.win_k[..., :flush, :], self.win_v[..., :flush, :])
            self.win_k, self.win_v = self.win_k[..., flush:, :], self.win_v[..., flush:, :]
        self.trace.append((self.cumulative_length, self.bits, self.main_bytes()))
        return out

    def states(self) -> tuple[torch.Tensor, torch.Tensor]:
        """What the cache holds: [sink, dequantised main, window] for keys and values, in the model's dtype."""
        ks, vs = [self.sink_k], [self.sink_v]
        if self.main_k is not None:
            ks.append(self._dequantize_keys(self.main_k))
            vs.append(self.main_v.dequantize(self.dtype))
        ks.append(self.win_k)
        vs.append(self.win_v)
        return torch.cat(ks, dim=-2), torch.cat(vs, dim=-2)

    def get_seq_length(self) -> int:
        return self.cumulative_length

    def reset(self) -> None:
        super().reset()
        self.bits, self.trace = self.init_bits, []
        self._clear()

    def _map_batch(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        if not self.is_initialized:
            return
        self.sink_k, self.sink_v, self.win_k, self.win_v = map(
            fn, (self.sink_k, self.sink_v, self.win_k, self.win_v)
        )
        for name in ("main_k", "main_v"):
            q = getattr(self, name)
            if q is not None:
                setattr(
                    self,
                    name,
                    QuantizedGroups(fn(q.packed), fn(q.range_), fn(q.zero), q.bits, q.group_size, q.dim),
                )

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._map_batch(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._map_batch(lambda t: t[indices])

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._map_batch(lambda t: t.repeat_interleave(repeats, dim=0))

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a quantised PM-KVQ cache cannot be cropped")


class _LayerList(Cache):
    """A `Cache` of `ProgressiveLayer`s with the accessors both PM-KVQ caches share."""

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if layer_idx >= len(self.layers):
            raise UserError(
                f"the cache has {len(self.layers)} blocks but the model has more (block {layer_idx}); "
                "give one budget (or bit-width) per block"
            )
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    def layer_bits(self) -> list[int]:
        """Current bit-width of each block's main cache."""
        return [layer.bits for layer in self.layers]

    def memory_bytes(self) -> list[int]:
        """Bytes of each block's main cache (codes + scales + zeros, or codes only with count_scales=False)."""
        return [layer.main_bytes() for layer in self.layers]

    def overhead_bytes(self) -> list[int]:
        """Bytes of each block's sink + window at 16 bit."""
        return [layer.overhead_bytes() for layer in self.layers]

    @property
    def trace(self) -> list[list[tuple[int, int, int]]]:
        """Per block: (cached tokens, bits, bytes of main) after every update."""
        return [list(layer.trace) for layer in self.layers]

    def bit_changes(self) -> list[list[tuple[int, int]]]:
        """Per block: (cached tokens, new bits) at every change of bit-width."""
        out = []
        for layer in self.layers:
            changes, last = [], layer.init_bits
            for tokens, bits, _ in layer.trace:
                if bits != last:
                    changes.append((tokens, bits))
                    last = bits
            out.append(changes)
        return out


class ProgressiveQuantizedCache(_LayerList):
    """PM-KVQ's cache: one byte budget per block (per sequence), progressive 16 → 8 → 4 → 2 bit."""

    layer_class = ProgressiveLayer

    def __init__(
        self,
        budgets_bytes: Sequence[float],
        *,
        init_bits: int = 16,
        min_bits: int = 2,
        n_sink: int = 1,
        window: int = 128,
        group_size: int | None = None,
        count_scales: bool = True,
        **layer_kwargs: Any,
    ) -> None:
        budgets = list(budgets_bytes)
        if not budgets or any(not b > 0 for b in budgets):
            raise UserError(f"every block budget must be > 0 bytes, got {budgets}")
        self.budgets_bytes = budgets
        layers = [
            self.layer_class(
                b,
                layer_idx=i,
                init_bits=init_bits,
                min_bits=min_bits,
                n_sink=n_sink,
                window=window,
                group_size=group_size,
                count_scales=count_scales,
                **layer_kwargs,
            )
            for i, b in enumerate(budgets)
        ]
        super().__init__(layers=layers)


class FixedBitsCache(_LayerList):
    """The KIVI-style baseline with the same quantiser: every token goes to its final bit-width at once.

    ``bits``: one bit-width for every block, or one per block.
    """

    layer_class = ProgressiveLayer

    def __init__(
        self,
        bits: Sequence[int] | int,
        *,
        n_sink: int = 1,
        window: int = 128,
        group_size: int | None = None,
        **layer_kwargs: Any,
    ) -> None:
        def make(b: int, i: int = 0) -> ProgressiveLayer:
            b = check_bits(b, CACHE_BITS)
            return self.layer_class(
                math.inf,
                layer_idx=i,
                init_bits=b,
                min_bits=b,
                n_sink=n_sink,
                window=window,
                group_size=group_size,
                **layer_kwargs,
            )

        if isinstance(bits, int):
            make(bits)  # validate now
            self.bits_per_block = None
            super().__init__(layer_class_to_replicate=functools.partial(make, bits))
        else:
            self.bits_per_block = [int(b) for b in bits]
            super().__init__(layers=[make(b, i) for i, b in enumerate(self.bits_per_block)])

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if self.layer_class_to_replicate is not None:
            while len(self.layers) <= layer_idx:
                self.layers.append(self.layer_class_to_replicate())
                self.layers[-1].layer_idx = len(self.layers) - 1
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)
