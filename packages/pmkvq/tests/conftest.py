"""Shared fixtures of the iclr26-pmkvq tests: one torch thread, tiny Llama / Qwen2 models."""

from __future__ import annotations

import pytest

from iclr26_core.testing import one_thread_fixture

_one_thread = one_thread_fixture()  # tiny tensors on a shared 2-core machine


@pytest.fixture(scope="session")
def tiny():
    """{"llama": factory, "qwen2": factory} of tiny random-init models (tests cannot import conftest)."""
    return {"llama": tiny_llama, "qwen2": tiny_qwen2}


def tiny_llama(**kw):
    """hidden 64, 4 heads, 2 KV heads (head_dim 16), 2 blocks, vocab 512."""
    from iclr26_core.models import tiny_model

    return tiny_model("llama", **kw)


def tiny_qwen2(seed: int = 0, **kw):
    """Qwen2 with q/k/v biases, GQA (4 heads, 2 KV heads), head_dim 16."""
    import torch
    import transformers

    cfg = dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    cfg.update(kw)
    torch.manual_seed(seed)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**cfg)).eval()
    with torch.no_grad():  # non-zero biases, so that the bias path of the reparameterisation is exercised
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                proj.bias.normal_(0.0, 0.5)
    return model
