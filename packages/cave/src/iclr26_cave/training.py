"""Explicit training loops: NOVUM for `CaveModel` (§1; Adam, momentum-updated volumes) and cross-entropy for the
2D baseline. Batches are drawn with the core's seeded `batch_indices`; a NaN loss stops with `TrainingDiverged`."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from iclr26_core.errors import TrainingDiverged
from iclr26_core.train import batch_indices


def _check(loss: torch.Tensor, step: int) -> None:
    if not math.isfinite(loss.item()):
        raise TrainingDiverged(f"the loss became {float(loss)} at step {step} (lower the learning rate)")


def train_novum(
    model,
    images: torch.Tensor,
    pix_to_vertex: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 400,
    lr: float = 1e-3,
    batch_size: int = 32,
    weight_decay: float = 1e-4,
    seed: int = 0,
    progress: Callable | None = None,
    log: list | None = None,
) -> list[float]:
    """NOVUM training of Φ (Adam) with the momentum update of the volumes after every step; returns the losses."""
    model.check_targets(images, pix_to_vertex, labels)
    model.train()
    opt = torch.optim.Adam(model.phi.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    it = range(steps) if progress is None else progress(range(steps), desc="NOVUM", leave=False)
    for step in it:
        idx = torch.tensor(batch_indices(len(images), batch_size, step, seed))
        loss = model.novum_loss(images[idx], pix_to_vertex[idx], labels[idx])
        _check(loss, step)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if log is not None:
            log.append({"step": step, "loss": losses[-1]})
    recalibrate_batchnorm(model.phi, images)
    model.eval()
    # visibility statistics over the whole training set (for the concept filter), not over the sampled batches
    with torch.no_grad():
        model.visibility.zero_()
        model.class_images.zero_()
        model.class_images.index_add_(0, labels, torch.ones(len(labels), dtype=model.class_images.dtype))
        off = model.offsets[labels][:, None]
        for i in range(len(images)):
            seen = torch.unique(pix_to_vertex[i][pix_to_vertex[i] >= 0])
            model.visibility[seen + off[i]] += 1
    return losses


@torch.no_grad()
def recalibrate_batchnorm(module: torch.nn.Module, images: torch.Tensor, batch_size: int = 64) -> None:
    """Precise BatchNorm: replace the running statistics by their exact average over the training images (train-mode
    forward passes without gradients). After a few hundred steps the momentum-0.1 running estimates can lag the
    weights (a 300-step 2D model scored 0.50 training accuracy in eval mode and 0.99 with batch statistics)."""
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    module.train()
    for i in range(0, len(images), batch_size):
        module(images[i : i + batch_size])
    for m, mom in zip(norms, saved, strict=True):
        m.momentum = mom
    module.eval()


def train_ce(
    model,
    images: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 300,
    lr: float = 1e-3,
    batch_size: int = 32,
    weight_decay: float = 1e-4,
    seed: int = 0,
    progress: Callable | None = None,
) -> list[float]:
    """Cross-entropy training of a classifier returning logits [B,Y]."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    it = range(steps) if progress is None else progress(range(steps), desc="2D CE", leave=False)
    for step in it:
        idx = torch.tensor(batch_indices(len(images), batch_size, step, seed))
        loss = torch.nn.functional.cross_entropy(model(images[idx]), labels[idx])
        _check(loss, step)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    recalibrate_batchnorm(model, images)
    return losses


@torch.no_grad()
def predict(
    fn: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, batch_size: int = 200
) -> torch.Tensor:
    """Concatenated ``fn`` outputs over batches of ``images``."""
    return torch.cat([fn(images[i : i + batch_size]) for i in range(0, len(images), batch_size)])
