"""SafeMoE fine-tuning: LoRA SFT epochs alternating with routing-alignment passes ("bi-level greedy").

Per epoch (spec Method step 4):
  (a) one SFT epoch on D_ft: causal-LM cross-entropy on answer tokens (labels −100 elsewhere), AdamW + cosine
      schedule with 3 % warm-up;
  (b) a pass over D_s in batches of ``batch_size``: forward, L_route = KL_batchmean(softmax(r/τ) ‖ softmax(z/τ))
      over [B, L, E], backward, ``optimizer.step()`` on the same AdamW state; the scheduler is NOT stepped.
Only LoRA weights train (router and experts frozen), so routing drift comes from attention-induced changes of
the hidden states and (b) pulls it back through the same LoRA. ``defense=False`` is the undefended SFT arm.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from iclr26_core.errors import TrainingDiverged, UserError

from .registry import lora_defaults
from .routing import RoutingReference, check_prompts, reference_routing, router_logits, routing_alignment_loss


@dataclass
class FinetuneResult:
    """The fine-tuned (peft) model, the task/defence wall-clock seconds and the loss logs."""

    model: Any
    task_seconds: float
    defense_seconds: float
    task_losses: list[float] = field(default_factory=list)
    route_losses: list[float] = field(default_factory=list)
    optimizer_steps: int = 0
    scheduler_steps: int = 0


def default_lora(model: Any, r: int = 8):
    """LoRA r=8 on the registry's targets for this architecture (OLMoE/Mixtral: q/v, α 8)."""
    from peft import LoraConfig

    targets, alpha = lora_defaults(model)
    return LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none")


def wrap_lora(model: Any, lora: Any = None):
    """``peft.get_peft_model`` with router and experts frozen (everything but LoRA has requires_grad=False)."""
    import warnings

    from peft import get_peft_model

    with warnings.catch_warnings():  # peft 0.21 calls a transformers-5 deprecated property
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model = get_peft_model(model, lora or default_lora(model))
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    return model


def lora_delta_sq(model: Any) -> torch.Tensor:
    """Σ over LoRA-wrapped Linears of ‖ΔW‖²_F with ΔW = scaling·B·A [out, in] (the squared L2 distance to θ₀)."""
    total = None
    for module in model.modules():
        a, b = getattr(module, "lora_A", None), getattr(module, "lora_B", None)
        if a is None or b is None or not hasattr(a, "keys"):
            continue
        for key in a:
            delta = module.scaling[key] * (b[key].weight @ a[key].weight)
            sq = delta.pow(2).sum()
            total = sq if total is None else total + sq
    if total is None:
        raise UserError("proximal > 0 needs a peft LoRA model")
    return total


def alignment_phase(
    model: Any,
    optimizer: torch.optim.Optimizer,
    safe_inputs: dict[str, torch.Tensor],
    reference: RoutingReference | torch.Tensor,
    tau: float = 0.1,
    batch_size: int = 32,
    grad_clip: float | None = None,
) -> list[float]:
    """Phase (b): ⌈N/B⌉ optimizer steps on L_route alone; returns the per-step losses. No scheduler step.

    No gradient clipping by default: the spec's phase (b) is forward, backward, ``optimizer.step()``.
    """
    if not tau > 0:
        raise UserError(f"tau must be > 0, got {tau}")
    check_prompts(safe_inputs)
    ref = reference.logits if isinstance(reference, RoutingReference) else reference
    ids, mask = safe_inputs["input_ids"], safe_inputs.get("attention_mask")
    if mask is None:
        mask = torch.ones_like(ids)
    if ref.shape[0] != ids.shape[0]:
        raise UserError(f"reference has {ref.shape[0]} prompts but {ids.shape[0]} safe prompts were given")
    device = next(model.parameters()).device
    model.train()
    losses = []
    params = [p for p in model.parameters() if p.requires_grad]
    for s in range(0, ids.shape[0], batch_size):
        z = router_logits(model, ids[s : s + batch_size].to(device), mask[s : s + batch_size].to(device))
        loss = routing_alignment_loss(z, ref[s : s + batch_size].to(device), tau)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        losses.append(float(loss.detach()))
    optimizer.zero_grad(set_to_none=True)
    return losses


def safemoe_finetune(
    model: Any,
    train_data: dict[str, torch.Tensor],
    safe_inputs: dict[str, torch.Tensor],
    *,
    reference: RoutingReference | None = None,
    lora: Any = None,
    epochs: int = 3,
    lr: float = 1e-4,
    tau: float = 0.1,
    batch_size: int = 32,
    defense: bool = True,
    seed: int = 42,
    weight_decay: float = 0.01,
    warmup_ratio: float = 0.03,
    grad_clip: float | None = 1.0,
    route_grad_clip: float | None = None,
    proximal: float = 0.0,
    progress: Callable | None = None,
) -> FinetuneResult:
    """Fine-tune ``model`` with LoRA on ``train_data`` ({input_ids, attention_mask, labels} [N, T]).

    With ``defense=True`` every epoch ends with the routing-alignment pass over ``safe_inputs``
    ({input_ids, attention_mask}, prompts only) towards ``reference`` (recorded here from ``model`` before
    LoRA when None). ``grad_clip`` clips the task steps (the Trainer's default 1.0), ``route_grad_clip`` the
    phase-(b) steps (None: unclipped, as the spec describes the pass). ``proximal`` = ρ adds the Lisa-like peer's
    (ρ/2)·Σ‖ΔW‖²_F to the task loss (ΔW = scale·B·A, the LoRA update, i.e. L2 to θ₀). Returns a `FinetuneResult` with the peft model and the task vs defence seconds.
    """
    from transformers import get_cosine_schedule_with_warmup

    if not tau > 0:
        raise UserError(f"tau must be > 0, got {tau}")
    if epochs < 1 or batch_size < 1:
        raise UserError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    n = int(train_data["input_ids"].shape[0])
    if n == 0:
        raise UserError("the fine-tuning data is empty")
    if defense:
        check_prompts(safe_inputs)
        if reference is None:
            reference = reference_routing(model, safe_inputs, batch_size=batch_size)
        elif isinstance(reference, RoutingReference):
            reference.check(model)
    model = wrap_lora(model, lora)
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(n / batch_size)
    total = steps_per_epoch * epochs
    scheduler = get_cosine_schedule_with_warmup(optimizer, math.ceil(warmup_ratio * total), total)
    gen = torch.Generator().manual_seed(seed)
    mask_all = train_data.get("attention_mask")
    if mask_all is None:
        mask_all = torch.ones_like(train_data["input_ids"])
    res = FinetuneResult(model, 0.0, 0.0)
    epochs_iter = (
        range(epochs) if progress is None else progress(range(epochs), total=epochs, desc="fine-tune")
    )
    for _ in epochs_iter:
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, batch_size):
            idx = perm[s : s + batch_size]
            out = model(
                input_ids=train_data["input_ids"][idx].to(device),
                attention_mask=mask_all[idx].to(device),
                labels=train_data["labels"][idx].to(device),
                use_cache=False,
            )
            loss = out.loss
            if proximal:
                loss = loss + 0.5 * proximal * lora_delta_sq(model)
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"the task loss became {float(loss)}; lower lr={lr}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            optimizer.step()
            scheduler.step()
            res.optimizer_steps += 1
            res.scheduler_steps += 1
            res.task_losses.append(float(loss.detach()))
        res.task_seconds += time.perf_counter() - t0
        if defense:
            t1 = time.perf_counter()
            losses = alignment_phase(
                model, optimizer, safe_inputs, reference, tau, batch_size, route_grad_clip
            )
            res.route_losses.extend(losses)
            res.optimizer_steps += len(losses)
            res.defense_seconds += time.perf_counter() - t1
    model.eval()
    return res


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class SafeMoECallback(_callback_base()):
    """A `transformers.TrainerCallback` running phase (b) with the Trainer's own optimizer.

    ``schedule="epoch"`` (the paper's default) runs it at ``on_epoch_end``; ``schedule="step"`` every
    ``every`` optimizer steps (an ablation). The Trainer's LR scheduler is never stepped by the callback.
    """

    def __init__(
        self,
        reference,
        safe_inputs,
        tau: float = 0.1,
        batch_size: int = 32,
        schedule: str = "epoch",
        every: int = 1,
    ):
        if not tau > 0:
            raise UserError(f"tau must be > 0, got {tau}")
        if schedule not in ("epoch", "step"):
            raise UserError(f"schedule must be 'epoch' or 'step', got {schedule!r}")
        check_prompts(safe_inputs)
        self.reference, self.safe_inputs = reference, safe_inputs
        self.tau, self.batch_size, self.schedule, self.every = tau, batch_size, schedule, max(1, int(every))
        self.calls = 0
        self.losses: list[float] = []
        self.seconds = 0.0
        self._optimizer = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):
        self._optimizer = optimizer

    def _run(self, model, optimizer):
        optimizer = optimizer or self._optimizer
        if optimizer is None:
            raise RuntimeError("SafeMoECallback: the Trainer passed no optimizer")
        t0 = time.perf_counter()
        self.losses.extend(
            alignment_phase(model, optimizer, self.safe_inputs, self.reference, self.tau, self.batch_size)
        )
        self.seconds += time.perf_counter() - t0
        self.calls += 1

    def on_epoch_end(self, args, state, control, model=None, optimizer=None, **kw):
        if self.schedule == "epoch":
            self._run(model, optimizer)

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kw):
        if self.schedule == "step" and state.global_step % self.every == 0:
            self._run(model, optimizer)
