"""Training on an algorithmic task with (or without) the regulariser, on top of `iclr26_core.train`.

`train_with_regularizer` runs full-batch (or mini-batch) AdamW at a constant learning rate, evaluates every
``eval_every`` steps (train/validation accuracy and the normalised Stab_ρ of the output distribution on
validation inputs: normalised, and centred by subtracting ‖E M‖²) and stops when the validation accuracy reaches ``target`` (or at ``steps``). It returns a
`RunResult` with steps and wall-clock to the target, the curve and the stability trajectory.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .regularizer import NoiseStabilityRegularizer, model_logits, select
from .stability import noise_stability_stats
from .tasks import Task


@dataclass
class RunResult:
    """One training run. ``steps_to_target`` is None when the target was not reached within ``steps``."""

    steps_to_target: int | None
    steps: int
    seconds: float  # training wall-clock (evaluation excluded)
    seconds_to_target: float | None
    curve: list[dict[str, float]] = field(default_factory=list)  # step, loss, train_acc, val_acc, stability
    final_val_acc: float = 0.0
    diverged: str | None = None

    @property
    def reached(self) -> bool:
        return self.steps_to_target is not None

    def capped_steps(self, cap: int) -> int:
        """Steps to the target, counting a run that missed it as ``cap``."""
        return self.steps_to_target if self.steps_to_target is not None else cap

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Reached(Exception):
    """Raised from the evaluation callback to stop training at the target."""


@torch.no_grad()
def accuracy(model: Any, task: Task, split: str = "val", batch_size: int = 4096) -> float:
    """Fraction of ``split`` rows whose argmax over the class logits at ``task.readout`` is the label."""
    x, y = (task.x_val, task.y_val) if split == "val" else (task.x_train, task.y_train)
    device = next(model.parameters()).device
    correct = 0
    for i in range(0, len(x), batch_size):
        xb = x[i : i + batch_size].to(device)
        logits = select(model_logits(model, xb), task.readout, xb.dim(), task.n_classes)
        correct += int((logits.argmax(-1).cpu() == y[i : i + batch_size]).sum())
    return correct / max(len(x), 1)


def task_loss(task: Task, regularizer: NoiseStabilityRegularizer | None = None) -> Callable[[Any, Any], Any]:
    """``loss_fn(model, (x, y))``: cross-entropy of the class logits at the readout, plus γ·R when given.

    A regulariser without its own ``readout``/``classes`` compares the softmax over the task's classes at
    ``task.readout`` — the distribution the cross-entropy sees — and, without its own ``support``, resamples
    noised tokens from the task's (a copy is made).
    """
    if regularizer is not None and None in (regularizer.readout, regularizer.classes, regularizer.support):
        regularizer = copy.copy(regularizer)
        if regularizer.readout is None:
            regularizer.readout = task.readout
        if regularizer.classes is None:
            regularizer.classes = task.n_classes
        if regularizer.support is None:
            regularizer.support = task.support

    def loss_fn(model: Any, batch: Any) -> torch.Tensor:
        x, y = batch
        logits = model_logits(model, x)
        out = select(logits, task.readout, x.dim(), task.n_classes)
        loss = F.cross_entropy(out.float(), y)
        if regularizer is not None and regularizer.gamma > 0:
            loss = loss + regularizer(model, x, logits)
        return loss

    return loss_fn


def train_with_regularizer(
    model: Any,
    dataset: Task,
    *,
    regularizer: NoiseStabilityRegularizer | None = None,
    steps: int,
    lr: float,
    weight_decay: float,
    eval_fn: Callable[[Any], float] | None = None,
    eval_every: int = 50,
    target: float = 0.99,
    betas: tuple[float, float] = (0.9, 0.98),
    batch_size: int | None = None,
    optimizer: Any = None,
    stability_rho: float = 0.25,
    stability_draws: int = 8,
    stability_noise: str = "paper",
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
    desc: str = "train",
    stop_at_target: bool = True,
) -> RunResult:
    """Train ``model`` on ``dataset`` (a `Task`) with AdamW at constant ``lr``; see the module docstring.

    ``eval_fn(model) -> float`` replaces the validation accuracy as the score compared with ``target``.
    ``optimizer`` replaces AdamW (e.g. a Grokfast optimizer). ``stability_draws=0`` skips the stability
    trajectory. A NaN/inf loss stops the run (``diverged`` holds the message).
    """
    from iclr26_core.errors import TrainingDiverged
    from iclr26_core.train import TrainConfig, batch_indices, train_lm

    task = dataset
    n = len(task.x_train)
    full = batch_size is None or batch_size >= n

    def batches(step: int):
        if full:
            return task.x_train, task.y_train
        idx = batch_indices(n, batch_size, step, seed)
        return task.x_train[idx], task.y_train[idx]

    cfg = TrainConfig(
        steps=steps,
        batch_size=n if full else batch_size,
        lr=lr,
        weight_decay=weight_decay,
        betas=tuple(betas),
        grad_clip=None,
        eval_every=eval_every,
        seed=seed,
        device=device,
        progress=progress,
        desc=desc,
    )
    curve: list[dict[str, float]] = []
    losses: list[float] = []
    clock = {"start": time.perf_counter(), "eval": 0.0, "hit": None}
    gen = torch.Generator().manual_seed(10_000 + seed)

    def on_step(step: int, loss: float) -> None:
        losses.append(loss)

    def evaluate(m: Any) -> float:
        t0 = time.perf_counter()
        step = len(losses)
        score = float(eval_fn(m)) if eval_fn is not None else accuracy(m, task, "val")
        point = {"step": step, "loss": losses[-1], "val_acc": score, "train_acc": accuracy(m, task, "train")}
        if stability_draws:
            stats = noise_stability_stats(
                m,
                task.x_val.to(next(m.parameters()).device),
                stability_rho,
                n_draws=stability_draws,
                noise=stability_noise,
                positions=task.positions,
                readout=task.readout,
                vocab_size=task.vocab_size,
                generator=gen,
                classes=task.n_classes,
                support=task.support,
            )
            point["stability"] = stats["normalized"]
            point["centered"] = stats["centered"]
            point["centered_normalized"] = stats["centered_normalized"]
        curve.append(point)
        clock["eval"] += time.perf_counter() - t0
        if score >= target and clock["hit"] is None:
            clock["hit"] = (step, time.perf_counter() - clock["start"] - clock["eval"])
            if stop_at_target:
                raise _Reached
        return score

    diverged = None
    try:
        train_lm(
            model,
            None,
            cfg=cfg,
            loss_fn=task_loss(task, regularizer),
            batches=batches,
            lr_schedule=lambda s: 1.0,
            eval_fn=evaluate,
            on_step=on_step,
            optimizer=optimizer,
        )
    except _Reached:
        pass
    except TrainingDiverged as exc:
        diverged = str(exc)
    model.eval()
    seconds = time.perf_counter() - clock["start"] - clock["eval"]
    hit = clock["hit"]
    return RunResult(
        steps_to_target=hit[0] if hit else None,
        steps=len(losses),
        seconds=seconds,
        seconds_to_target=hit[1] if hit else None,
        curve=curve,
        final_val_acc=curve[-1]["val_acc"] if curve else 0.0,
        diverged=diverged,
    )
