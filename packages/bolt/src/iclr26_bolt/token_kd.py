"""Token-level baselines: SFT (CE on the gold option's tokens) and token-level KD (CE on the teacher's argmax
option text).

Our reading of the paper's token-level KD baseline: the student is trained with next-token cross-entropy on
the sequence ``prompt + teacher's argmax option``, the loss over prompt *and* answer tokens
(``loss_on="all"``); SFT puts the loss on the answer tokens of the gold option only (``loss_on="answer"``).
Both are exposed through ``loss_on``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError

LOSS_ON = ("answer", "all")


def token_ce_loss(
    model: Any,
    prompts: Sequence[Sequence[int]],
    answers: Sequence[Sequence[int]],
    *,
    loss_on: str = "answer",
    pad_id: int = 0,
) -> torch.Tensor:
    """Mean next-token cross-entropy over the loss tokens of ``prompt + answer`` sequences (right-padded).

    ``loss_on="answer"``: the answer tokens only (SFT); ``"all"``: every token after the first (token KD).
    """
    if loss_on not in LOSS_ON:
        raise UserError(f"unknown loss_on={loss_on!r}; choose one of {', '.join(LOSS_ON)}")
    device = next(model.parameters()).device
    seqs = [list(p) + list(a) for p, a in zip(prompts, answers, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    for i, (s, p) in enumerate(zip(seqs, prompts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        start = len(p) if loss_on == "answer" else 1
        labels[i, start : len(s)] = ids[i, start : len(s)]
    logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits[:, :-1].float()
    target = labels[:, 1:].to(device)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)
