"""Peers on the same data: torchmetrics' multiclass Jaccard cross-checks our mIoU; segmentation-models-pytorch's
FPN and Unet (resnet18 encoder, random init) are real-time CNN baselines with per-domain mIoU and the same FPS
measurement (``bench=true``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def torchmetrics_miou(pred: np.ndarray, target: np.ndarray, num_classes: int) -> float | None:
    """torchmetrics' dataset-level multiclass Jaccard (macro, 255 ignored, absent classes excluded); ``None`` when
    torchmetrics is not installed."""
    try:
        import torch
        from torchmetrics.functional.classification import multiclass_jaccard_index
    except ImportError:
        return None
    p, t = torch.as_tensor(pred).long().ravel(), torch.as_tensor(target).long().ravel()
    present = torch.zeros(num_classes, dtype=torch.bool)
    keep = t != 255
    present[p[keep].unique()] = True
    present[t[keep].unique()] = True
    per_class = multiclass_jaccard_index(p, t, num_classes, average="none", ignore_index=255)
    return float(per_class[present].mean())


def bench_peers(cfg: Any, ctx: Any, data: dict[str, Any]) -> dict[str, Any]:
    """FPN and Unet (segmentation-models-pytorch) trained with cross-entropy on the source images, the same steps,
    batch and learning rate as QPrompt; per-domain mIoU and FPS at C1's size."""
    try:
        import segmentation_models_pytorch as smp
    except ImportError:
        ctx.peers_missing(["segmentation-models-pytorch"])
        return {}
    import torch
    import torch.nn.functional as F

    from iclr26_core.train import TrainConfig, batch_indices, train_lm

    from .data import to_pixel_values
    from .experiment import score_domains
    from .speed import measure_fps

    images, labels = data["train"]
    x, y = to_pixel_values(images), torch.as_tensor(labels).long()
    t, s = cfg.train, cfg.speed
    out = {}
    for name, cls in (("smp FPN-r18", smp.FPN), ("smp Unet-r18", smp.Unet)):
        torch.manual_seed(int(cfg.seed))
        model = cls("resnet18", encoder_weights=None, classes=int(cfg.data.num_classes))

        def batches(step: int):
            idx = batch_indices(len(x), int(t.batch_size), step, int(cfg.seed))
            return x[idx], y[idx]

        def loss_fn(m: Any, batch: Any):
            return F.cross_entropy(m(batch[0]), batch[1], ignore_index=255)

        tc = TrainConfig(
            steps=int(t.steps), batch_size=int(t.batch_size), lr=float(t.lr), seed=int(cfg.seed), desc=name
        )
        ctx.log(f"peer {name}: training {t.steps} steps")
        train_lm(model, None, cfg=tc, batches=batches, loss_fn=loss_fn)
        model.eval()
        scores = score_domains(model, data, int(cfg.data.num_classes))
        fps = measure_fps(
            model, (int(s.image_size), int(s.image_size)), warmup=int(s.warmup), iters=int(s.iters)
        )
        out[name] = {"miou": scores["miou"], "target": scores["target"], "fps": fps.fps, "ms": fps.ms_median}
    return out
