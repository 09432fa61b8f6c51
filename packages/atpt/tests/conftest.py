"""A tiny random-init digits CLIP (the spec's toy config) with its BPE tokenizer, one torch thread."""

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
