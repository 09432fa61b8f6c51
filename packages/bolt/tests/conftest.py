"""Shared fixtures of the iclr26-bolt tests: one torch thread, a tiny GPT-2 with a tokenizer."""

from __future__ import annotations

import pytest

from iclr26_core.testing import one_thread_fixture

_one_thread = one_thread_fixture()  # tiny tensors on a shared 2-core machine


@pytest.fixture(scope="session")
def tiny_lm():
    """(model, tokenizer): a random tiny GPT-2 with odd sizes and the core's BPE tokenizer."""
    from iclr26_core.testing import odd_model
    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(300)
    model = odd_model("gpt2", vocab_size=len(tok), n_positions=256)
    return model, tok


@pytest.fixture(scope="session")
def world_tok():
    from iclr26_bolt.experiment import build_tokenizer
    from iclr26_bolt.world import make_world

    world = make_world(0)
    return world, build_tokenizer(world, 512, seed=0)
