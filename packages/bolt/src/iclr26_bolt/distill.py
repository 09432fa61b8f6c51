"""``distill``: ODD on a user's student with LoRA (peft), reading the teacher's cached option distributions.

The paper's recipe: LoRA on q/k/v/o/gate/up/down (r 16, α 32, dropout 0.05), AdamW lr 2e-4, weight decay 0,
batch 1 × 8 accumulation (here: 8 items per optimizer step, the same gradient), grad clip 1.0, 1 epoch,
λ_KL = 1.0, λ_CE = 0.1. The loop is `iclr26_core.train` (accelerate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from iclr26_core.errors import UserError

from .items import check_items
from .prompts import PromptTemplate
from .scorer import OptionScorer, load_image
from .student import ArmConfig, train_student
from .teacher import TeacherCache

PAPER_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
GPT2_TARGETS = ["c_attn", "c_proj", "c_fc"]


def default_lora(model: Any) -> Any:
    """The paper's LoRA config; GPT-2 style models get their fused attention/MLP projections instead."""
    from peft import LoraConfig

    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    targets = [t for t in PAPER_TARGETS if t in names]
    fan_in_fan_out = False
    if not targets:
        targets = [t for t in GPT2_TARGETS if t in names]
        fan_in_fan_out = bool(targets)  # GPT-2's Conv1D stores weights transposed
    if not targets:
        targets = "all-linear"
    return LoraConfig(
        r=16,
        lora_alpha=32,
        lora_dropout=0.05,
        target_modules=targets,
        fan_in_fan_out=fan_in_fan_out,
        task_type="CAUSAL_LM",
    )


def distill(
    student: Any,
    processor: Any,
    items: Sequence[dict[str, Any]],
    cache: TeacherCache,
    *,
    lora: Any = None,
    lr: float = 2e-4,
    grad_accum: int = 8,
    epochs: int = 1,
    steps: int | None = None,
    template: PromptTemplate | None = None,
    lambda_kl: float = 1.0,
    lambda_ce: float = 0.1,
    label_smoothing: float = 0.0,
    seed: int = 0,
    device: str = "auto",
    progress: bool = True,
    arm: str = "odd",
) -> Any:
    """Wrap ``student`` with LoRA and train it with the ODD loss against ``cache``; returns the `PeftModel`.

    ``items``: dicts with ``id``, ``question``, ``options``, optional ``answer`` (gold index; without one the
    CE anchor is skipped for that item), ``image``, ``context``. ``steps`` overrides ``epochs``. ``arm``: "odd"
    (the method) or a token-level baseline on the same LoRA recipe: "sft", "token_kd", "token_kd_answer".
    The training losses are kept on ``model.bolt_losses``.
    """
    from peft import get_peft_model

    items = check_items(items)
    cache.check(items)
    if grad_accum < 1 or epochs < 1 or (steps is not None and steps < 1):
        raise UserError("grad_accum, epochs and steps must be >= 1")
    model = get_peft_model(student, lora if lora is not None else default_lora(student))
    scorer = OptionScorer(model, processor, template=template, share_prompt=True)
    encoded = [
        scorer.encode(it["question"], it["options"], load_image(it.get("image")), it.get("context"))
        for it in items
    ]
    gold = [int(it["answer"]) if it.get("answer") is not None else -1 for it in items]
    n_steps = steps if steps is not None else epochs * math.ceil(len(items) / grad_accum)
    cfg = ArmConfig(
        arm=arm,
        steps=n_steps,
        batch_size=min(grad_accum, len(items)),
        lr=lr,
        lambda_kl=lambda_kl,
        lambda_ce=lambda_ce,
        label_smoothing=label_smoothing,
        seed=seed,
        progress=progress,
        desc=f"distill ({arm})",
    )
    has_images = any(e.extra for e in encoded)
    res = train_student(
        model,
        encoded,
        gold,
        cfg,
        teacher_probs=cache.probs_of(items),
        pad_id=scorer.pad_id,
        device=device,
        score_fn=(lambda m, encs: scorer.raw_scores(encs)) if has_images else None,
    )
    model.eval()
    model.bolt_losses = res.losses
    return model
