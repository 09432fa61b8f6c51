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


QWEN_CHAT = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="session")
def tiny_vlm():
    """(model, processor): a randomly initialised Qwen2-VL (2 text layers of width 32, one vision block) with a
    processor built here: the core's BPE plus Qwen2-VL's special tokens, a Qwen-style chat template and the
    dynamic-resolution image processor (a larger image gives more image tokens, which is what HR changes)."""
    import torch
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(300)
    specials = [
        "<|im_start|>",
        "<|im_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
    ]
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.chat_template = QWEN_CHAT
    image_proc = Qwen2VLImageProcessor(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 64)
    proc = Qwen2VLProcessor(
        image_processor=image_proc,
        tokenizer=tok,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=QWEN_CHAT,
    )
    ids = tok.convert_tokens_to_ids
    cfg = Qwen2VLConfig(
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 1024,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
        },
        vision_config={
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 32,
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    return Qwen2VLForConditionalGeneration(cfg).eval(), proc
