"""Training a student on encoded multiple-choice items: ODD, SFT or token-level KD, on `iclr26_core.train`.

* ``"odd"``: the option-level decision distillation loss on the student's option scores (`odd_loss`).
* ``"sft"``: next-token CE on the gold option's tokens (``loss_on="answer"``).
* ``"token_kd"``: next-token CE on ``prompt + teacher's argmax option``, over prompt and answer tokens
  (``loss_on="all"``; one reading of the paper's token-level KD baseline);
* ``"token_kd_answer"``: the same teacher labels with the loss on the answer tokens only (the other reading).
  The paper does not say which; the official code has no token-KD baseline. C1 is decided against the stronger.

Each optimizer step takes ``batch_size`` items (the paper's batch 1 × 8 accumulation is the same gradient as a
batch of 8 items); the batch of step s is a pure function of (seed, s), so arms trained with the same seed see
the same items in the same order. The learning rate is constant by default, as in the official training script
(AdamW at a fixed lr, no scheduler); ``schedule="cosine"`` uses the core's warmup + cosine decay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from iclr26_core.errors import UserError

from .odd import odd_loss
from .scorer import Encoded, shared_prompt_logprobs
from .token_kd import token_ce_loss

ARMS = ("odd", "sft", "token_kd", "token_kd_answer")
KD_ARMS = ("token_kd", "token_kd_answer")  # the two readings of the paper's token-level KD baseline
ARM_NAMES = {
    "odd": "ODD",
    "sft": "SFT",
    "token_kd": "token-KD (all tokens)",
    "token_kd_answer": "token-KD (answer)",
}
SCHEDULES = ("constant", "cosine")
# token-level arms: (target, loss_on)
TOKEN_ARMS = {
    "sft": ("gold", "answer"),
    "token_kd": ("teacher", "all"),
    "token_kd_answer": ("teacher", "answer"),
}


@dataclass
class ArmConfig:
    """Optimisation settings of one student arm (the paper: AdamW lr 2e-4, wd 0, clip 1.0, batch 8)."""

    arm: str = "odd"
    steps: int = 400
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    warmup_steps: int = 0
    schedule: str = "constant"  # the official script: AdamW at a constant lr; "cosine": the core's schedule
    lambda_kl: float = 1.0
    lambda_ce: float = 0.1
    label_smoothing: float = 0.0
    seed: int = 0
    progress: bool = True
    desc: str = ""


def odd_batch_loss(
    model: Any,
    encoded: Sequence[Encoded],
    teacher: Sequence[torch.Tensor],
    gold: Sequence[int],
    pad_id: int,
    cfg: ArmConfig,
    score_fn: Any = None,
) -> torch.Tensor:
    """ODD loss of a batch of items: each prompt run once, its K_i options continued from its cache
    (``score_fn(model, encoded) -> [K_i]`` replaces that, e.g. for VLM items with image tensors)."""
    if score_fn is not None:
        scores = list(score_fn(model, encoded))
    else:
        scores = shared_prompt_logprobs(
            model, [e.prompt_ids for e in encoded], [e.option_ids for e in encoded], pad_id
        )
    same_k = len({e.k for e in encoded}) == 1
    if same_k:
        s = torch.stack(scores)
        t = torch.stack([p.to(s.device) for p in teacher])
        return odd_loss(s, t, list(gold), lambda_kl=cfg.lambda_kl, lambda_ce=cfg.lambda_ce,
                        label_smoothing=cfg.label_smoothing)  # fmt: skip
    return odd_loss(scores, list(teacher), list(gold), lambda_kl=cfg.lambda_kl, lambda_ce=cfg.lambda_ce,
                    label_smoothing=cfg.label_smoothing)  # fmt: skip


def train_student(
    model: Any,
    encoded: Sequence[Encoded],
    gold: Sequence[int],
    cfg: ArmConfig,
    *,
    teacher_probs: Sequence[torch.Tensor] | None = None,
    pad_id: int = 1,
    device: str = "cpu",
    position: int | None = None,
    score_fn: Any = None,
    on_step: Any = None,
) -> Any:
    """Train ``model`` in place with arm ``cfg.arm``; returns the core's `TrainResult` (losses per step).

    ``gold``: the gold option per item (−1: none); ``teacher_probs``: p_T per item (needed by odd/token_kd).
    """
    from iclr26_core.train import TrainConfig, batch_indices, train_lm

    if cfg.arm != "odd" and cfg.arm not in TOKEN_ARMS:
        raise UserError(f"unknown arm {cfg.arm!r}; choose one of odd, {', '.join(TOKEN_ARMS)}")
    if cfg.schedule not in SCHEDULES:
        raise UserError(f"unknown schedule {cfg.schedule!r}; choose one of {', '.join(SCHEDULES)}")
    if cfg.arm != "sft" and teacher_probs is None:
        raise UserError(f"arm {cfg.arm!r} needs the teacher's probabilities")
    n = len(encoded)
    if n == 0:
        raise UserError("no training items")
    if cfg.arm == "sft" and any(g < 0 for g in gold):
        raise UserError("SFT needs a gold answer for every training item")
    targets = (
        list(gold) if cfg.arm in ("sft", "odd") else [int(torch.argmax(p)) for p in teacher_probs]  # type: ignore[union-attr]
    )
    tcfg = TrainConfig.from_section(
        cfg, betas=(0.9, 0.999), device=device, desc=cfg.desc or cfg.arm, position=position
    )

    def batches(step: int) -> torch.Tensor:
        return torch.tensor(batch_indices(n, cfg.batch_size, step, cfg.seed))

    def loss_fn(m: Any, idx: torch.Tensor) -> torch.Tensor:
        rows = idx.tolist()
        encs = [encoded[i] for i in rows]
        if cfg.arm == "odd":
            tp = [teacher_probs[i] for i in rows]  # type: ignore[index]
            return odd_batch_loss(m, encs, tp, [gold[i] for i in rows], pad_id, cfg, score_fn)
        loss_on = TOKEN_ARMS[cfg.arm][1]
        prompts = [e.prompt_ids for e in encs]
        answers = [e.option_ids[targets[i]] for e, i in zip(encs, rows, strict=True)]
        return token_ce_loss(m, prompts, answers, loss_on=loss_on, pad_id=pad_id)

    constant = (lambda s: 1.0) if cfg.schedule == "constant" else None
    return train_lm(model, None, cfg=tcfg, loss_fn=loss_fn, batches=batches, lr_schedule=constant,
                    on_step=on_step)  # fmt: skip
