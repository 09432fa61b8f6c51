"""How much memory a DeLiVR training step needs, printed before `train` starts (users ask: joint attention grows
as (T·N)²).

The estimate counts fp32 bytes of what one step holds at its peak:

* **weights**: parameters, their gradients and AdamW's two moments, 4 × parameters × 4 bytes;
* **attention**: every block keeps, for the backward pass, the per-head MLP g's input and hidden layer
  (1 + ``bias_hidden`` values per token pair) and about three [heads, TN, TN] tensors (g's output, the masked
  logits, the softmax), plus four [TN, TN] tensors of the shared Lie bias — (T·N)² per value and per clip;
* **convolutions**: the full-resolution stem keeps about four [C, H, W] maps per frame.

bf16 autocast (`train.precision`) halves the convolution and attention-probability parts; the estimate is the fp32
upper bound. ``tests/test_delivr_memory.py`` checks it against the bytes autograd really saves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class MemoryEstimate:
    weights: int  # bytes
    attention: int
    convolutions: int
    tokens: int  # T·N joint-attention tokens per clip

    @property
    def total(self) -> int:
        return self.weights + self.attention + self.convolutions

    def describe(self) -> str:
        gib = 2**30
        return (
            f"memory estimate per training step ≈ {self.total / gib:.2f} GiB (fp32): attention "
            f"{self.attention / gib:.2f} GiB over {self.tokens} tokens per clip, convolutions "
            f"{self.convolutions / gib:.2f} GiB, weights + AdamW {self.weights / gib:.3f} GiB"
        )


def training_memory(config, parameters: int, batch: int, height: int, width: int) -> MemoryEstimate:
    """The estimate above for a batch of ``batch`` clips of [T, 3, height, width] (padded to multiples of p)."""
    p = config.patch
    hp, wp = math.ceil(height / p), math.ceil(width / p)
    tokens = config.frames * hp * wp
    pairs = batch * tokens * tokens
    per_block = 1 + config.bias_hidden + 3 * config.heads
    attention = 4 * pairs * (config.depth * per_block + 4)
    convolutions = 4 * batch * config.frames * 4 * config.embed_dim * (hp * p) * (wp * p)
    return MemoryEstimate(16 * parameters, attention, convolutions, tokens)
