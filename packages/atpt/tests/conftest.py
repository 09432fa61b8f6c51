"""A tiny random-init digits CLIP (the spec's toy config) with its BPE tokenizer, one torch thread, and the
check every prompt learner passes (one optimizer step moves ``ctx``; ``reset()`` restores it bit for bit)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def toy():
    from transformers import CLIPModel

    from iclr26_atpt.digits import prompt_tokenizer, toy_clip_config

    tok = prompt_tokenizer()
    torch.manual_seed(0)
    model = CLIPModel(toy_clip_config(len(tok), tok.eos_token_id, tok.pad_token_id)).eval()
    return model, tok


def _ctx_moves_then_resets(learner) -> None:
    init = learner.ctx.detach().clone()
    opt = torch.optim.AdamW([learner.ctx], lr=0.1)
    learner.text_features().sum().backward()
    opt.step()
    assert not torch.equal(learner.ctx.detach(), init)
    learner.reset()
    assert torch.equal(learner.ctx.detach(), init)


@pytest.fixture
def ctx_moves_then_resets():
    """``ctx_moves_then_resets(learner)``: one AdamW step changes ``ctx``, ``reset()`` gives it back exactly."""
    return _ctx_moves_then_resets
