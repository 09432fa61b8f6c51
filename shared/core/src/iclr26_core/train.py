"""A short, explicit training loop on `accelerate`: grad clipping, warmup + cosine schedule, progress bar,
periodic evaluation, optional EMA weights, checkpoint/resume, NaN detection.

    result = train_lm(model, blocks["train"], blocks["validation"], TrainConfig(steps=120, lr=3e-3))
    result = train_lm(model, None, cfg=cfg, batches=sample, loss_fn=my_loss, eval_fn=score)  # any batch shape

Runs on the CPU here and data-parallel on several processes (GPUs, or CPUs with gloo) when started by
``torchrun`` / ``accelerate launch``: each of the W processes takes its own ``batch_size`` rows of the step's
``W * batch_size`` rows, the gradients are averaged, and every process ends with the same weights as one process
training on the combined batch (tested in ``tests/test_distributed.py``). The batch of step ``s`` is a pure
function of ``(seed, s)`` (a fresh permutation per epoch), so a run resumed from a checkpoint sees exactly
the batches it would have seen without stopping.

    torchrun --nproc_per_node 8 my_script.py                               # one node, 8 GPUs
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 \
        --rdzv_backend c10d --rdzv_endpoint HOST:29500 my_script.py         # two nodes (node_rank 1 on the other)
    torchrun --standalone --nproc_per_node 2 my_script.py                   # CPU processes (gloo), as the test

Checkpoints (``checkpoint_dir/step-<N>/``): ``model.safetensors`` (no pickle) and ``trainer_state.pt``
(optimizer, schedule, step: tensors and numbers only, read back with ``torch.load(weights_only=True)``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import TrainingDiverged, UserError


@dataclass
class TrainConfig:
    steps: int = 100
    batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    grad_clip: float | None = 1.0
    eval_every: int = 0  # 0: evaluate only at the end (when eval data is given)
    eval_batches: int | None = 8
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    seed: int = 0
    device: str = "auto"
    progress: bool = True
    desc: str = "train"
    position: int | None = None  # progress-bar line (one per worker process)
    ema: float = 0.0  # > 0: keep an exponential moving average of the weights (evaluated, returned)
    # AdamW's implementation: None (torch's default choice: single-tensor on the CPU), "foreach" (multi-tensor:
    # same arithmetic, fewer small ops; ≈ 10 % per step for tiny CPU models) or "fused" (one kernel)
    adamw_impl: str | None = None

    @classmethod
    def from_section(cls, section: Any, **overrides: Any) -> TrainConfig:
        """The fields of ``section`` that TrainConfig also has, then ``overrides`` (which win).

        ``section``: a package's own settings (a dataclass or other object with attributes, or a mapping such as
        a hydra config section); its other keys are ignored and the fields it lacks keep TrainConfig's
        defaults. ``TrainConfig.from_section(stage, steps=n, desc=stage.name)`` replaces a call that forwards
        ``steps=..., lr=stage.lr, weight_decay=stage.weight_decay, ...`` one keyword at a time.
        """
        missing = object()
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if isinstance(section, Mapping):
                value = section.get(f.name, missing)
            else:
                value = getattr(section, f.name, missing)
            if value is not missing:
                kw[f.name] = tuple(value) if f.name == "betas" else value
        return cls(**{**kw, **overrides})


def adamw_kwargs(impl: str | None) -> dict[str, bool]:
    """``{"foreach": True}`` / ``{"fused": True}`` / ``{}`` for ``torch.optim.AdamW`` (`TrainConfig.adamw_impl`)."""
    if impl in (None, "default"):
        return {}
    if impl not in ("foreach", "fused"):
        raise UserError(f"adamw_impl must be foreach, fused or null, got {impl!r}")
    return {impl: True}


@dataclass
class TrainResult:
    losses: list[float] = field(default_factory=list)  # training loss per step
    evals: list[tuple[int, float]] = field(default_factory=list)  # (step, mean eval loss)
    steps: int = 0
    seconds: float = 0.0
    ema_model: Any = None  # the averaged model when TrainConfig.ema > 0

    @property
    def final_eval(self) -> float | None:
        return self.evals[-1][1] if self.evals else None


def lr_lambda(step: int, cfg: TrainConfig) -> float:
    """Multiplier of the base lr: linear warmup, then cosine from 1 to ``min_lr_ratio``."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(cfg.steps - cfg.warmup_steps, 1)
    progress = min((step - cfg.warmup_steps) / span, 1.0)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Row indices of the batch at ``step``: epochs of a seeded permutation of ``range(n)``, concatenated."""
    import torch

    out: list[int] = []
    start = step * batch_size
    while len(out) < batch_size:
        epoch, offset = divmod(start + len(out), n)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        out.extend(perm[offset : offset + batch_size - len(out)].tolist())
    return out


def _rows(data: Any, idx: list[int]):
    import torch

    if isinstance(data, torch.Tensor):
        return data[idx]
    rows = data[idx]
    rows = rows["input_ids"] if isinstance(rows, dict) else rows
    return rows if isinstance(rows, torch.Tensor) else torch.as_tensor(rows)


def _to_device(batch: Any, device: Any) -> Any:
    if isinstance(batch, tuple | list):
        return type(batch)(_to_device(b, device) for b in batch)
    return batch.to(device)


def causal_lm_loss(model: Any, batch: Any):
    return model(input_ids=batch, labels=batch).loss


def reset_accelerate_state() -> None:
    """Forget the process-wide `accelerate` state an earlier Accelerator left behind (a `transformers` Trainer
    with ``bf16=True`` would otherwise carry its mixed precision into the next loop); the distributed setup
    (``PartialState``: process group, ranks) stays. `train_lm` calls it before it builds its Accelerator."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=False)


def train_lm(
    model: Any,
    train_data: Any,
    eval_data: Any = None,
    cfg: TrainConfig | None = None,
    loss_fn: Callable[[Any, Any], Any] = causal_lm_loss,
    resume_from: str | Path | None = None,
    optimizer: Any = None,
    *,
    batches: Callable[[int], Any] | None = None,
    lr_schedule: Callable[[int], float] | None = None,
    eval_fn: Callable[[Any], float] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` AdamW steps on rows of ``train_data`` ([N, T] tensor or dataset).

    ``loss_fn(model, batch) -> scalar`` defaults to the causal-LM loss. ``resume_from`` is a checkpoint
    directory written by an earlier call (``checkpoint_dir/step-N``); training continues at step N.
    Raises `TrainingDiverged` when the loss is NaN/inf.

    For other data: ``batches(step)`` returns the batch of a step (a tensor or a tuple of tensors, moved to the
    device) instead of rows of ``train_data``; ``lr_schedule(step)`` replaces the warmup + cosine multiplier;
    ``eval_fn(model) -> float`` replaces the mean eval loss (both at ``eval_every`` and at the end; evaluated
    under ``no_grad`` in eval mode, on the EMA weights when ``cfg.ema`` > 0); ``on_step(step, loss)`` runs after
    every optimizer step.
    """
    import torch
    from accelerate import Accelerator
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    from .cli import progress, seed_everything

    cfg = cfg or TrainConfig()
    seed_everything(cfg.seed)
    reset_accelerate_state()
    accel = Accelerator(cpu=cfg.device == "cpu")
    if batches is None:
        n = len(train_data)
        if n == 0:
            raise UserError("no training data")
        world, rank, bs = accel.num_processes, accel.process_index, cfg.batch_size

        def batches(step: int) -> Any:  # this process's share of the step's world * batch_size rows
            return _rows(
                train_data, batch_indices(n, bs * world, step, cfg.seed)[rank * bs : (rank + 1) * bs]
            )

    if optimizer is None:
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, **adamw_kwargs(cfg.adamw_impl)
        )
    schedule = lr_schedule or (lambda s: lr_lambda(s, cfg))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    start = 0
    if resume_from is not None:
        start = load_training_state(resume_from, model, optimizer, scheduler)
    model, optimizer = accel.prepare(model, optimizer)
    ema = None
    if cfg.ema > 0:
        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema), use_buffers=True)
    result = TrainResult(steps=start)
    model.train()
    t0 = time.perf_counter()
    steps = range(start, cfg.steps)
    show = cfg.progress and accel.is_main_process  # one bar, not one per process
    bar = (
        progress(steps, total=cfg.steps, initial=start, desc=cfg.desc, position=cfg.position)
        if show
        else steps
    )
    for step in bar:
        loss = loss_fn(model, _to_device(batches(step), accel.device))
        if not torch.isfinite(loss.detach()):
            raise TrainingDiverged(
                f"the training loss became {float(loss.detach())} at step {step}; "
                f"lower the learning rate (lr={cfg.lr}) or check the data"
            )
        optimizer.zero_grad(set_to_none=True)
        accel.backward(loss)
        if cfg.grad_clip:
            accel.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        if ema is not None:
            ema.update_parameters(model)
        result.losses.append(float(loss.detach()))
        result.steps = step + 1
        if on_step is not None:
            on_step(step, result.losses[-1])
        if show and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{result.losses[-1]:.3f}", refresh=False)
        last = step + 1 == cfg.steps
        if (eval_data is not None or eval_fn is not None) and (
            (cfg.eval_every and (step + 1) % cfg.eval_every == 0) or last
        ):
            current = ema.module if ema is not None else model
            if eval_fn is not None:
                current.eval()
                with torch.no_grad():
                    value = float(eval_fn(current))
                model.train()
            else:
                value = evaluate_loss(current, eval_data, cfg, loss_fn, accel.device)
            result.evals.append((step + 1, value))
        if cfg.checkpoint_dir and cfg.checkpoint_every and ((step + 1) % cfg.checkpoint_every == 0 or last):
            if accel.is_main_process:  # the weights are the same in every process
                save_training_state(
                    Path(cfg.checkpoint_dir) / f"step-{step + 1}",
                    accel.unwrap_model(model),
                    optimizer,
                    scheduler,
                    step + 1,
                )
            accel.wait_for_everyone()
    result.seconds = time.perf_counter() - t0
    model.eval()
    if ema is not None:
        result.ema_model = accel.unwrap_model(ema.module).eval()
    return result


def train_briefly(
    model: Any,
    train_data: Any,
    cfg: Any,
    *,
    seed: int,
    device: str,
    desc: str,
    warmup_steps: int | None = None,
) -> Any:
    """The miniatures' pretraining step: `train_lm` for ``cfg.steps`` AdamW steps (none when 0) of
    ``cfg.batch_size`` rows at ``cfg.lr`` with ``warmup_steps`` (default ``cfg.warmup_steps``), on the CPU when
    ``device`` is ``"cpu"`` (a run's ``ctx.device``), else wherever `accelerate` puts it. Returns ``model``."""
    steps = int(cfg.steps)
    if steps > 0:
        warmup = int(cfg.warmup_steps) if warmup_steps is None else int(warmup_steps)
        config = TrainConfig(
            steps=steps,
            batch_size=int(cfg.batch_size),
            lr=float(cfg.lr),
            warmup_steps=warmup,
            seed=seed,
            device="cpu" if device == "cpu" else "auto",
            desc=desc,
        )
        train_lm(model, train_data, None, config)
    return model


def evaluate_loss(
    model: Any, data: Any, cfg: TrainConfig, loss_fn: Callable = causal_lm_loss, device: Any = "cpu"
) -> float:
    """Mean ``loss_fn`` over the first ``cfg.eval_batches`` batches of ``data`` (in order)."""
    import torch

    was = model.training
    model.eval()
    n = len(data)
    nb = math.ceil(n / cfg.batch_size)
    nb = min(nb, cfg.eval_batches) if cfg.eval_batches else nb
    total, count = 0.0, 0
    with torch.no_grad():
        for b in range(nb):
            idx = list(range(b * cfg.batch_size, min((b + 1) * cfg.batch_size, n)))
            batch = _rows(data, idx).to(device)
            total += float(loss_fn(model, batch)) * len(idx)
            count += len(idx)
    model.train(was)
    return total / count


def save_training_state(directory: str | Path, model: Any, optimizer: Any, scheduler: Any, step: int) -> Path:
    """Write model weights (safetensors) and optimizer/schedule state atomically to ``directory``."""
    import torch
    from safetensors.torch import save_model

    from .fs import staged_dir

    with staged_dir(directory) as tmp:
        save_model(model, str(tmp / "model.safetensors"))
        torch.save(
            {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step},
            tmp / "trainer_state.pt",
        )
    return Path(directory)


def load_training_state(directory: str | Path, model: Any, optimizer: Any, scheduler: Any) -> int:
    """Restore what `save_training_state` wrote; returns the step to continue from."""
    import torch
    from safetensors.torch import load_model

    from .errors import CheckpointError

    directory = Path(directory)
    try:
        load_model(model, str(directory / "model.safetensors"))
        state = torch.load(directory / "trainer_state.pt", weights_only=True)
    except (OSError, RuntimeError) as exc:
        raise CheckpointError(f"cannot resume from {str(directory)!r}: {str(exc).splitlines()[0]}") from None
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])
