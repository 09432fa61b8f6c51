"""Option-level Decision Distillation (ODD): align the student's option distribution with the teacher's.

    p_S = softmax_k(s_S(k))                   (no temperature on the student)
    L   = λ_KL · KL(p_T ‖ p_S) + λ_CE · CE(y_ε, p_S)
    y_ε = (1 − ε)·δ_y + ε/K                   (label smoothing ε; ε = 0: one-hot)

Probabilities are clamped at 1e-8 before the logarithm (as the official code). The loss is invariant to adding
a constant to all s_S(k) of an item; items with different K are handled one by one (pass lists).
Paper defaults: λ_KL = 1.0, λ_CE = 0.1, ε = 0, teacher temperature τ_kd = 2.0 (applied when the cache is built).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from iclr26_core.errors import UserError

EPS = 1e-8


def _one(s: torch.Tensor, pt: torch.Tensor, y: int, lambda_kl: float, lambda_ce: float, eps_ls: float):
    k = s.shape[-1]
    p_s = torch.softmax(s.float(), dim=-1).clamp(min=EPS, max=1.0)
    log_ps = p_s.log()
    p_t = pt.float().to(s.device)
    p_t = (p_t / p_t.sum(-1, keepdim=True).clamp(min=EPS)).clamp(min=EPS, max=1.0)
    kl = (p_t * (p_t.log() - log_ps)).sum(-1)
    if y is None or y < 0:
        ce = torch.zeros_like(kl)
    else:
        target = torch.full((k,), eps_ls / k, device=s.device)
        target[y] += 1.0 - eps_ls
        ce = -(target * log_ps).sum(-1)
    return lambda_kl * kl + lambda_ce * ce


def odd_loss(
    student_scores: torch.Tensor | Sequence[torch.Tensor],
    teacher_probs: torch.Tensor | Sequence[torch.Tensor],
    gold: torch.Tensor | Sequence[int],
    *,
    lambda_kl: float = 1.0,
    lambda_ce: float = 0.1,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Mean ODD loss over a batch.

    student_scores: [B, K] or a list of [K_i]; teacher_probs: the same shapes (rows are renormalised);
    gold: [B] option indices (a negative index: no gold, the CE term is skipped for that item).
    """
    if not 0.0 <= label_smoothing < 1.0:
        raise UserError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    gold_list = gold.tolist() if isinstance(gold, torch.Tensor) else [int(g) for g in gold]
    if isinstance(student_scores, torch.Tensor) and isinstance(teacher_probs, torch.Tensor):
        if student_scores.shape != teacher_probs.shape or student_scores.dim() != 2:
            raise UserError(
                f"student scores {tuple(student_scores.shape)} and teacher probabilities "
                f"{tuple(teacher_probs.shape)} must both be [B, K]"
            )
        if len(gold_list) != student_scores.shape[0]:
            raise UserError(f"{len(gold_list)} gold labels for a batch of {student_scores.shape[0]}")
        s = student_scores.float()
        k = s.shape[-1]
        log_ps = torch.softmax(s, -1).clamp(min=EPS, max=1.0).log()
        p_t = teacher_probs.float().to(s.device)
        p_t = (p_t / p_t.sum(-1, keepdim=True).clamp(min=EPS)).clamp(min=EPS, max=1.0)
        kl = (p_t * (p_t.log() - log_ps)).sum(-1)
        g = torch.tensor(gold_list, device=s.device)
        has = g >= 0
        target = torch.full_like(s, label_smoothing / k)
        target[has, g[has]] += 1.0 - label_smoothing
        ce = -(target * log_ps).sum(-1) * has
        return (lambda_kl * kl + lambda_ce * ce).mean()
    scores, probs = list(student_scores), list(teacher_probs)
    if not (len(scores) == len(probs) == len(gold_list)):
        raise UserError(
            f"{len(scores)} score rows, {len(probs)} teacher rows and {len(gold_list)} gold labels"
        )
    if not scores:
        raise UserError("odd_loss of an empty batch")
    losses = []
    for s, pt, y in zip(scores, probs, gold_list, strict=True):
        if s.shape != pt.shape:
            raise UserError(
                f"an item has {s.shape[-1]} student scores but {pt.shape[-1]} teacher probabilities"
            )
        if y >= s.shape[-1]:
            raise UserError(f"gold index {y} out of range for {s.shape[-1]} options")
        losses.append(_one(s, pt, y, lambda_kl, lambda_ce, label_smoothing))
    return torch.stack(losses).mean()
