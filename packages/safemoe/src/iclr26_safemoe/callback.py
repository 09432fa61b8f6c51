"""`SafeMoECallback`: SafeMoE's phase (b) inside a `transformers.Trainer` (or trl's `SFTTrainer`).

The callback runs the routing-alignment pass with the Trainer's own optimizer at ``on_epoch_end`` (the
paper's schedule) or every ``every`` optimizer steps (``schedule="step"``, an ablation); it never steps the
Trainer's LR scheduler. Phase (b) uses the Trainer's batch (per-device batch × gradient accumulation) and its
bf16 setting.
"""

from __future__ import annotations

import time

from iclr26_core.errors import UserError

from .finetune import alignment_phase
from .routing import check_prompts


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class SafeMoECallback(_callback_base()):
    """A `transformers.TrainerCallback` running phase (b) with the Trainer's own optimizer.

    ``batch_size=None`` takes the Trainer's per-device batch × gradient-accumulation steps (the official
    code's phase-(b) batch). ``tau2_scaling`` and ``grad_clip`` are the ablations of `alignment_phase`.
    """

    def __init__(
        self,
        reference,
        safe_inputs,
        tau: float = 0.1,
        batch_size: int | None = 32,
        schedule: str = "epoch",
        every: int = 1,
        *,
        tau2_scaling: bool = False,
        grad_clip: float | None = None,
    ):
        if not tau > 0:
            raise UserError(f"tau must be > 0, got {tau}")
        if schedule not in ("epoch", "step"):
            raise UserError(f"schedule must be 'epoch' or 'step', got {schedule!r}")
        check_prompts(safe_inputs)
        self.reference, self.safe_inputs = reference, safe_inputs
        self.tau, self.batch_size, self.schedule, self.every = tau, batch_size, schedule, max(1, int(every))
        self.tau2_scaling, self.grad_clip = tau2_scaling, grad_clip
        self.calls = 0
        self.losses: list[float] = []
        self.seconds = 0.0
        self._optimizer = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):
        self._optimizer = optimizer

    def _run(self, args, model, optimizer):
        optimizer = optimizer or self._optimizer
        if optimizer is None:
            raise RuntimeError("SafeMoECallback: the Trainer passed no optimizer")
        accum = int(getattr(args, "gradient_accumulation_steps", 1) or 1)
        batch = self.batch_size or int(args.per_device_train_batch_size) * accum
        t0 = time.perf_counter()
        self.losses.extend(
            alignment_phase(
                model,
                optimizer,
                self.safe_inputs,
                self.reference,
                self.tau,
                batch,
                self.grad_clip,
                grad_accum=accum,
                bf16=bool(getattr(args, "bf16", False)),
                tau2_scaling=self.tau2_scaling,
            )
        )
        self.seconds += time.perf_counter() - t0
        self.calls += 1

    def on_epoch_end(self, args, state, control, model=None, optimizer=None, **kw):
        if self.schedule == "epoch":
            self._run(args, model, optimizer)

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kw):
        if self.schedule == "step" and state.global_step % self.every == 0:
            self._run(args, model, optimizer)
