"""KIVI (Liu et al., ICML 2024) as a baseline cache: keys per channel, grouped over tokens; values per token.

KIVI's observation is that keys have outlier *channels* and values do not, so it quantises

* keys per channel: for every head and channel, a group of ``key_group`` consecutive tokens shares one range
  and zero (what the official PM-KVQ repository's KIVI arm does, ``k_quantizer`` applied to K transposed);
* values per token: groups of ``group_size`` channels of one token (our PM-KVQ layout).

Recent tokens wait in the full-precision window (KIVI's residual) and are flushed in multiples of ``window``
tokens, so ``window`` must be a multiple of ``key_group``. Everything else (sink, flush rule, attention on the
cache as it stood plus the current tokens in full precision, packed codes, float16 range and zero, the byte
accounting) is `ProgressiveLayer`'s. With ``key_group = group_size`` (the default: head_dim) a KIVI token costs
exactly the bytes of a PM-KVQ token at the same bits: head_dim·b/8 bytes of codes + 4·head_dim/g bytes of
ranges and zeros, for K and for V.
"""

from __future__ import annotations

import torch

from iclr26_core.errors import UserError

from .cache import FixedBitsCache, ProgressiveLayer, ProgressiveQuantizedCache
from .quantizer import QuantizedGroups, quantize_groups


class KIVILayer(ProgressiveLayer):
    """One block of a KIVI cache: keys stored as [B, H, n_chunks, D, key_group] groups (per channel)."""

    key_cat_dim = -3

    def __init__(self, *args, key_group: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if key_group is not None and int(key_group) <= 0:
            raise UserError(f"key_group must be > 0, got {key_group}")
        self.key_group_arg = key_group

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.key_group = int(self.key_group_arg or key_states.shape[-1])
        if self.window <= 0 or self.window % self.key_group:
            raise UserError(
                f"KIVI flushes whole groups of {self.key_group} tokens: window {self.window} must be a positive "
                f"multiple of key_group {self.key_group}"
            )

    def _quantize_keys(self, k: torch.Tensor) -> QuantizedGroups:
        g = self.key_group
        chunks = k.unflatten(-2, (k.shape[-2] // g, g)).transpose(-1, -2)  # [B, H, n, D, g]
        return quantize_groups(chunks, self.bits, g)

    def _dequantize_keys(self, q: QuantizedGroups) -> torch.Tensor:
        return q.dequantize(self.dtype).transpose(-1, -2).flatten(-3, -2)  # [B, H, n·g, D]


class KIVICache(FixedBitsCache):
    """KIVI at ``bits`` (one for every block, or one per block): a `transformers` cache like `FixedBitsCache`.

    ``key_group``: tokens per key group (default head_dim, which gives PM-KVQ's bytes per token at equal bits).
    """

    layer_class = KIVILayer  # FixedBitsCache passes ``key_group=`` on to every KIVILayer


class ProgressiveKIVICache(ProgressiveQuantizedCache):
    """PM-KVQ's progressive budgets with KIVI's layout (keys per channel over ``key_group`` tokens): the ERS
    shrink is layout-free, so the progressive idea applies on top of KIVI's grouping (an extra arm, not the
    paper's method)."""

    layer_class = KIVILayer
