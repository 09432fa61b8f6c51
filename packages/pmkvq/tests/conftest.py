"""Shared fixtures of the iclr26-pmkvq tests: one torch thread, tiny Llama / Qwen2 models."""

from __future__ import annotations

import pytest

from iclr26_core.testing import one_thread_fixture

_one_thread = one_thread_fixture()  # tiny tensors on a shared 2-core machine


@pytest.fixture(scope="session")
def tiny():
    """{"llama": factory, "qwen2": factory} of tiny random-init models (tests cannot import conftest)."""
    return {"llama": tiny_llama, "qwen2": tiny_qwen2, "phi3": tiny_phi3, "qwen3": tiny_qwen3}


def tiny_llama(**kw):
    """hidden 64, 4 heads, 2 KV heads (head_dim 16), 2 blocks, vocab 512."""
    from iclr26_core.models import tiny_model

    return tiny_model("llama", **kw)


def tiny_qwen2(seed: int = 0, **kw):
    """Qwen2 with q/k/v biases, GQA (4 heads, 2 KV heads), head_dim 16."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**_small(**kw))).eval()
    with torch.no_grad():  # non-zero biases, so that the bias path of the reparameterisation is exercised
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                proj.bias.normal_(0.0, 0.5)
    return model


def _small(**kw):
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
    return cfg


def tiny_phi3(seed: int = 0, **kw):
    """Phi-3 (one fused qkv_proj), GQA, head_dim 16, partial rotary 0.5 (8 rotated channels of 16)."""
    import torch
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.Phi3Config(**_small(partial_rotary_factor=0.5, **kw))
    return transformers.Phi3ForCausalLM(cfg).eval()


def tiny_qwen3(seed: int = 0, **kw):
    """Qwen3 (per-head RMS q_norm / k_norm shared by the heads), GQA, head_dim 16; norm weights made non-trivial."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**_small(head_dim=16, **kw))).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.uniform_(0.5, 2.0)
            layer.self_attn.k_norm.weight.uniform_(0.2, 5.0)
    return model
