"""`NerVECallback`: NerVE metrics during training, every ``log_steps`` optimizer steps (and at step 1).

Per measurement, `analyze` runs the probe under ``torch.no_grad()``: PreAct/PostAct of every layer stream
into covariance accumulators, (D² + D) floats each, 2·L of them at once by default, 2·k with
``layers_per_pass=k`` (one pass over the probe per group of k layers); then the layers become spectra one
at a time (covariance → eigvalsh → metrics → free). Each (step, layer) becomes one JSON line in
``<out_dir>/nerve_trajectory.jsonl``; ``seconds`` keeps the wall-clock time of every measurement.

* ``probe=<batch>`` (default use): a fixed probe batch ([B, S] ids or a dict), measured in eval mode, so
  that steps are comparable.
* ``probe="train_batch"``: the batch the model was trained on at that step (the official callback).

Works as a ``transformers.TrainerCallback`` and in a plain loop through ``measure(model, step)``. With
`iclr26_core.train.train_lm` pass ``on_step=callback.step_hook(model)`` (it runs after every optimizer
step, so it counts real updates). ``loss_fn=callback.wrap_loss(accumulation_steps=k)`` is the other way
(needed for ``probe="train_batch"``): it counts k training loss calls as one update (gradient
accumulation), measures before the next update's first micro-batch, and needs
``callback.finish(model, steps)`` after the loop.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from .analysis import analyze
from .errors import NerVEError


class NerVECallback(TrainerCallback):
    def __init__(
        self,
        probe: Any,
        log_steps: int = 200,
        sample_ratio: float = 1.0,
        out_dir: str | Path | None = None,
        save_eigenvalues: bool = False,
        center: bool = True,
        gated_pre: str = "gate",
        max_tokens: int | None = None,
        *,
        residual: bool = False,
        layers_per_pass: int | None = None,
    ) -> None:
        if log_steps < 1:
            raise NerVEError(f"log_steps must be ≥ 1, got {log_steps}")
        if isinstance(probe, str) and probe != "train_batch":
            raise NerVEError(f"probe must be a batch or 'train_batch', got {probe!r}")
        self.probe = probe
        self.log_steps = log_steps
        self.sample_ratio = sample_ratio
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.save_eigenvalues = save_eigenvalues
        self.center, self.gated_pre, self.max_tokens = center, gated_pre, max_tokens
        self.residual, self.layers_per_pass = residual, layers_per_pass
        self.history: list[dict] = []  # one dict per (step, layer), as written to the JSONL file
        self.measured_steps: list[int] = []
        self.seconds: list[float] = []  # wall-clock seconds of each measurement
        self._last_batch: Any = None
        self.on_measure: Any = None  # optional fn(model, step), called after each measurement
        self._hook = None

    # ------------------------------------------------------------------ the measurement itself
    @property
    def path(self) -> Path | None:
        return None if self.out_dir is None else self.out_dir / "nerve_trajectory.jsonl"

    def due(self, step: int) -> bool:
        return step == 1 or step % self.log_steps == 0

    def measure(self, model, step: int, batch: Any = None) -> list[dict]:
        """Measure ``model`` now (on ``batch``, else the probe) and log it as step ``step``."""
        model = getattr(model, "module", model)  # DDP / accelerate wrappers
        inputs = batch if batch is not None else self.probe
        if isinstance(inputs, str) or inputs is None:
            raise NerVEError(
                "probe='train_batch' needs the training batch: call measure(model, step, batch=...)"
            )
        t0 = time.perf_counter()
        report = analyze(
            model,
            inputs,
            sample_ratio=self.sample_ratio,
            center=self.center,
            gated_pre=self.gated_pre,
            max_tokens=self.max_tokens,
            keep_eigenvalues=self.save_eigenvalues,
            residual=self.residual,
            layers_per_pass=self.layers_per_pass,
        )
        rows = []
        for m in report.layers:
            row = {"step": int(step), **m.to_dict()}
            if self.save_eigenvalues:
                row["eig_pre"], row["eig_post"] = (report.eigenvalues[m.layer][k] for k in ("pre", "post"))
            rows.append(row)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
        self.history.extend(rows)
        self.measured_steps.append(int(step))
        self.seconds.append(time.perf_counter() - t0)
        if self.on_measure is not None:
            self.on_measure(model, int(step))
        return rows

    # ------------------------------------------------------------------ iclr26_core.train_lm
    def step_hook(self, model, start_step: int = 0):
        """An ``on_step(step, loss)`` for `train_lm`: measures after update ``step + 1`` when it is due.

        It runs after every optimizer step, so it counts updates, whatever the loss calls. The probe must be
        a batch (for ``probe="train_batch"`` use `wrap_loss`)."""
        if self.probe == "train_batch":
            raise NerVEError("probe='train_batch' needs the training batch: use wrap_loss() and finish()")

        def on_step(step: int, loss: float = float("nan")) -> None:
            done = start_step + int(step) + 1
            if self.due(done) and done not in self.measured_steps:
                self.measure(model, done)

        return on_step

    def wrap_loss(self, loss_fn=None, start_step: int = 0, accumulation_steps: int = 1):
        """A ``loss_fn(model, batch)`` that measures after every ``log_steps`` updates.

        One update is ``accumulation_steps`` training calls (gradient accumulation); calls in eval mode or
        without grad are evaluations and do not count. The measurement of update s happens at the first
        call of update s + 1 (so call `finish` after the loop); with ``probe="train_batch"`` it uses the
        last batch update s trained on."""
        from iclr26_core.train import causal_lm_loss

        if accumulation_steps < 1:
            raise NerVEError(f"accumulation_steps must be ≥ 1, got {accumulation_steps}")
        base = loss_fn or causal_lm_loss
        state = {"calls": 0}

        def fn(model, batch):
            if not (model.training and torch.is_grad_enabled()):  # an evaluation call, not a training step
                return base(model, batch)
            done, micro = divmod(state["calls"], accumulation_steps)
            s = start_step + done  # updates done so far
            if micro == 0 and s > 0 and self.due(s) and s not in self.measured_steps:
                self.measure(model, s, batch=self._last_batch if self.probe == "train_batch" else None)
            state["calls"] += 1
            self._last_batch = batch
            return base(model, batch)

        return fn

    def finish(self, model, step: int, batch: Any = None) -> None:
        """Measure after the last update if that step is due (the loss_fn wrapper cannot see it)."""
        if batch is None and self.probe == "train_batch":
            batch = self._last_batch
        if self.due(step) and step not in self.measured_steps:
            self.measure(model, step, batch=batch)

    # ------------------------------------------------------------------ transformers.Trainer
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.probe == "train_batch" and model is not None and self._hook is None:

            def stash(module, a, kw):
                batch = {k: v for k, v in kw.items() if k in ("input_ids", "attention_mask")}
                if not batch and a and isinstance(a[0], torch.Tensor):
                    batch = {"input_ids": a[0]}
                self._last_batch = {k: v.detach() for k, v in batch.items() if isinstance(v, torch.Tensor)}

            self._hook = model.register_forward_pre_hook(stash, with_kwargs=True)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = int(state.global_step)
        if model is not None and self.due(step) and step not in self.measured_steps:
            self.measure(model, step, batch=self._last_batch if self.probe == "train_batch" else None)

    def on_train_end(self, args, state, control, **kwargs):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
