"""Training a query segmenter (QPrompt or Mask2Former) with or without GRQA, on the core's accelerate loop.

L = L_seg (the model's own Hungarian-matched 2·CE + 5·BCE + 5·Dice on point-sampled masks, no-object weight 0.1)
+ λ·L_GRQA when a `GRQAConfig` is given. AdamW, cosine schedule, gradient clipping 1.0 (`iclr26_core.train`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .config import GRQAConfig


@dataclass
class SegTrainConfig:
    steps: int = 1000
    batch_size: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 0
    grad_clip: float = 1.0
    seed: int = 0
    device: str = "cpu"
    progress: bool = True
    desc: str = "train"
    eval_every: int = 0


def train_segmenter(
    model: Any,
    images: np.ndarray,
    labels: np.ndarray,
    cfg: SegTrainConfig | None = None,
    grqa: GRQAConfig | None = None,
    eval_fn: Any = None,
) -> tuple[Any, Any]:
    """Train ``model`` on uint8 images [N, H, W, 3] and label maps [N, H, W]; returns (model, TrainResult).

    ``grqa``: ``None`` trains the plain model (L_seg); a config adds λ·L_GRQA through `with_grqa`. The returned
    model is always the plain (unwrapped) model. ``eval_fn(model) -> float`` runs every ``cfg.eval_every`` steps.
    """
    from iclr26_core.train import TrainConfig, train_lm

    from .data import to_pixel_values
    from .grqa import labels_to_targets
    from .plugin import with_grqa

    cfg = cfg or SegTrainConfig()
    pixels = to_pixel_values(images)
    targets = torch.as_tensor(labels).long()
    net = with_grqa(model, grqa) if grqa is not None else model
    n = len(pixels)

    def batches(step: int):
        from iclr26_core.train import batch_indices

        idx = batch_indices(n, cfg.batch_size, step, cfg.seed)
        return pixels[idx], targets[idx]

    def loss_fn(m: Any, batch: Any):
        x, y = batch
        mask_labels, class_labels = labels_to_targets(y)
        return m(pixel_values=x, mask_labels=mask_labels, class_labels=class_labels).loss

    tc = TrainConfig.from_section(cfg, betas=(0.9, 0.999))  # every SegTrainConfig field is a TrainConfig one
    wrapped_eval = None
    if eval_fn is not None:

        def wrapped_eval(m: Any) -> float:
            return float(eval_fn(m.unwrap() if hasattr(m, "unwrap") else m))

    result = train_lm(net, None, cfg=tc, batches=batches, loss_fn=loss_fn, eval_fn=wrapped_eval)
    plain = net.unwrap() if hasattr(net, "unwrap") else net
    return plain.eval(), result
