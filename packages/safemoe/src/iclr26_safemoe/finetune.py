"""SafeMoE fine-tuning: LoRA SFT epochs alternating with routing-alignment passes ("bi-level greedy").

Per epoch (spec Method step 4):
  (a) one SFT epoch on D_ft: causal-LM cross-entropy on answer tokens (labels −100 elsewhere), AdamW + cosine
      schedule with 3 % warm-up;
  (b) a pass over D_s in batches of ``batch_size`` (= per-device batch × grad-accum): forward,
      L_route = KL_batchmean(softmax(r/τ) ‖ softmax(z/τ)) over [B, L, E], backward, ``optimizer.step()`` on the
      same AdamW state; the scheduler is NOT stepped.
Only LoRA weights train (router and experts frozen), so routing drift comes from attention-induced changes of
the hidden states and (b) pulls it back through the same LoRA. ``defense=False`` is the undefended SFT arm.
``schedule="step"`` runs (b) every ``every`` task steps instead (an ablation).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from iclr26_core.errors import TrainingDiverged, UserError

from .registry import check_lora_targets, lora_defaults
from .routing import RoutingReference, check_prompts, reference_routing, router_logits, routing_alignment_loss


@dataclass
class FinetuneResult:
    """The fine-tuned (peft) model, the task/defence wall-clock seconds and the loss logs."""

    model: Any
    task_seconds: float
    defense_seconds: float
    task_losses: list[float] = field(default_factory=list)
    route_losses: list[float] = field(default_factory=list)
    task_cpu_seconds: float = 0.0  # process CPU time of the task steps (robust to a loaded machine)
    defense_cpu_seconds: float = 0.0
    task_grad_norms: list[float] = field(default_factory=list)  # before clipping
    route_grad_norms: list[float] = field(default_factory=list)  # phase (b), before any clipping
    optimizer_steps: int = 0
    scheduler_steps: int = 0


def default_lora(model: Any, r: int = 8):
    """LoRA r=8 on the registry's targets for this architecture (OLMoE/Mixtral: q/v, α 8)."""
    from peft import LoraConfig

    targets, alpha = lora_defaults(model)
    return LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none")


def wrap_lora(model: Any, lora: Any = None):
    """``peft.get_peft_model`` with router and experts frozen (everything but LoRA has requires_grad=False).

    A configured target module that matches nothing is refused with one line (`check_lora_targets`)."""
    import warnings

    from peft import get_peft_model

    lora = lora or default_lora(model)
    check_lora_targets(model, getattr(lora, "target_modules", None))
    with warnings.catch_warnings():  # peft 0.21 calls a transformers-5 deprecated property
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model = get_peft_model(model, lora)
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


def _autocast(device: torch.device, bf16: bool):
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def _micro(n: int, grad_accum: int) -> list[slice]:
    """``grad_accum`` contiguous micro-batches of a batch of ``n`` rows (the last ones may be empty)."""
    step = math.ceil(n / grad_accum)
    return [slice(s, min(s + step, n)) for s in range(0, n, step)]


def alignment_phase(
    model: Any,
    optimizer: torch.optim.Optimizer,
    safe_inputs: dict[str, torch.Tensor],
    reference: RoutingReference | torch.Tensor,
    tau: float = 0.1,
    batch_size: int = 32,
    grad_clip: float | None = None,
    *,
    grad_accum: int = 1,
    bf16: bool = False,
    tau2_scaling: bool = False,
    grad_norms: list[float] | None = None,
) -> list[float]:
    """Phase (b): ⌈N/B⌉ optimizer steps on L_route alone; returns the per-step losses. No scheduler step.

    Each step's batch of ``batch_size`` prompts runs as ``grad_accum`` micro-batches whose gradients add up
    to the full batch's (the KL "batchmean" over B). No gradient clipping by default: the spec's phase (b) is
    forward, backward, ``optimizer.step()``; ``grad_clip`` clips it (an ablation). ``grad_norms``, when
    given, receives each step's total gradient norm before clipping.
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
        b_ids, b_mask, b_ref = ids[s : s + batch_size], mask[s : s + batch_size], ref[s : s + batch_size]
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for sl in _micro(b_ids.shape[0], grad_accum):
            with _autocast(device, bf16):
                z = router_logits(model, b_ids[sl].to(device), b_mask[sl].to(device))
            part = routing_alignment_loss(z, b_ref[sl].to(device), tau, tau2_scaling=tau2_scaling)
            part = part * (z.shape[0] / b_ids.shape[0])  # batchmean over the whole batch
            part.backward()
            total += float(part.detach())
        norm = torch.nn.utils.clip_grad_norm_(params, grad_clip or math.inf)
        if grad_norms is not None:
            grad_norms.append(float(norm))
        optimizer.step()
        losses.append(total)
    optimizer.zero_grad(set_to_none=True)
    return losses


def _task_step(model, batch, device, *, grad_accum, bf16, proximal) -> float:
    """Forward/backward of one task batch as ``grad_accum`` micro-batches with the full batch's token mean."""
    labels = batch["labels"]
    n_tok = int((labels[:, 1:] != -100).sum().clamp(min=1))  # the model shifts labels by one
    total = 0.0
    for sl in _micro(labels.shape[0], grad_accum):
        part_tok = int((labels[sl, 1:] != -100).sum())
        with _autocast(device, bf16):
            out = model(**{k: v[sl].to(device) for k, v in batch.items()}, use_cache=False)
        loss = out.loss.float() * (part_tok / n_tok) if part_tok else out.loss.float() * 0.0
        if proximal and sl.stop == labels.shape[0]:
            loss = loss + 0.5 * proximal * lora_delta_sq(model)
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"the task loss became {float(loss)}; lower the learning rate")
        loss.backward()
        total += float(loss.detach())
    return total


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
    grad_accum: int = 1,
    bf16: bool = False,
    schedule: str = "epoch",
    every: int = 1,
    tau2_scaling: bool = False,
    progress: Callable | None = None,
) -> FinetuneResult:
    """Fine-tune ``model`` with LoRA on ``train_data`` ({input_ids, attention_mask, labels} [N, T]).

    With ``defense=True`` every epoch ends with the routing-alignment pass over ``safe_inputs``
    ({input_ids, attention_mask}, prompts only) towards ``reference`` (recorded here from ``model`` before
    LoRA when None). ``batch_size`` is the optimizer batch (per-device batch × ``grad_accum``); ``bf16`` runs
    forward passes under bf16 autocast (weights and optimizer stay fp32, as the Trainer's ``bf16=True``).
    ``grad_clip`` clips the task steps (the Trainer's default 1.0), ``route_grad_clip`` the phase-(b) steps
    (None: unclipped, as the spec describes the pass). ``schedule="step"`` runs phase (b) after every
    ``every`` task steps instead of every epoch (an ablation). ``tau2_scaling`` multiplies L_route by τ² (an
    ablation). ``proximal`` = ρ adds the Lisa-like peer's (ρ/2)·Σ‖ΔW‖²_F to the task loss (ΔW = scale·B·A,
    the LoRA update, i.e. L2 to θ₀). Returns a `FinetuneResult` with the peft model and the task vs defence
    seconds.
    """
    from transformers import get_cosine_schedule_with_warmup

    if not tau > 0:
        raise UserError(f"tau must be > 0, got {tau}")
    if epochs < 1 or batch_size < 1 or grad_accum < 1 or every < 1:
        raise UserError(
            f"epochs, batch_size, grad_accum and every must be >= 1, got {epochs}, {batch_size}, "
            f"{grad_accum}, {every}"
        )
    if schedule not in ("epoch", "step"):
        raise UserError(f"schedule must be 'epoch' or 'step', got {schedule!r}")
    n = int(train_data["input_ids"].shape[0])
    if n == 0:
        raise UserError("the fine-tuning data is empty")
    if defense:
        check_prompts(safe_inputs)
        if reference is None:
            reference = reference_routing(model, safe_inputs, batch_size=batch_size)
        elif isinstance(reference, RoutingReference):
            reference.check(model)
            reference.check_router(model)
    with torch.random.fork_rng(devices=[]):  # the LoRA init follows ``seed``, not the global RNG's state
        torch.manual_seed(seed)
        model = wrap_lora(model, lora)
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(n / batch_size)
    total = steps_per_epoch * epochs
    scheduler = get_cosine_schedule_with_warmup(optimizer, math.ceil(warmup_ratio * total), total)
    gen = torch.Generator().manual_seed(seed)
    data = dict(train_data)
    if data.get("attention_mask") is None:
        data["attention_mask"] = torch.ones_like(data["input_ids"])
    res = FinetuneResult(model, 0.0, 0.0)

    def defend() -> None:
        t1, c1 = time.perf_counter(), time.process_time()
        losses = alignment_phase(
            model,
            optimizer,
            safe_inputs,
            reference,
            tau,
            batch_size,
            route_grad_clip,
            grad_accum=grad_accum,
            bf16=bf16,
            tau2_scaling=tau2_scaling,
            grad_norms=res.route_grad_norms,
        )
        res.route_losses.extend(losses)
        res.optimizer_steps += len(losses)
        res.defense_seconds += time.perf_counter() - t1
        res.defense_cpu_seconds += time.process_time() - c1

    epochs_iter = (
        range(epochs) if progress is None else progress(range(epochs), total=epochs, desc="fine-tune")
    )
    for _ in epochs_iter:
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, batch_size):
            t0, c0 = time.perf_counter(), time.process_time()
            model.train()
            idx = perm[s : s + batch_size]
            batch = {k: data[k][idx] for k in ("input_ids", "attention_mask", "labels")}
            optimizer.zero_grad(set_to_none=True)
            loss = _task_step(model, batch, device, grad_accum=grad_accum, bf16=bf16, proximal=proximal)
            norm = torch.nn.utils.clip_grad_norm_(params, grad_clip or math.inf)
            res.task_grad_norms.append(float(norm))
            optimizer.step()
            scheduler.step()
            res.optimizer_steps += 1
            res.scheduler_steps += 1
            res.task_losses.append(loss)
            res.task_seconds += time.perf_counter() - t0
            res.task_cpu_seconds += time.process_time() - c0
            if defense and schedule == "step" and res.scheduler_steps % every == 0:
                defend()
        if defense and schedule == "epoch":
            defend()
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return res
