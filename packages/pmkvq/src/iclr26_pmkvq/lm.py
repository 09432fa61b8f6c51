"""The miniature's models and text: a tiny Llama trained on pydoc text (C2, C3), a tiny Qwen2 (C4).

Llama: hidden 128, 4 layers, 4 heads, 2 KV heads (GQA), head_dim 32, intermediate 256, rope_theta 1e4,
byte-level BPE vocab 512 (`iclr26_core.tokenizers`), trained ``train.steps`` AdamW steps on the pydoc train
topics (`iclr26_core.corpus`, split by topic) so that attention is not uniform; held-out texts come from the
validation topics. With ``model.name`` set (a local path or hub id) the user's model and tokenizer are used
as they are.
"""

from __future__ import annotations

from typing import Any

import torch

from iclr26_core.errors import UserError
from iclr26_core.models import tiny_llama


def tiny_qwen2(q: Any, seed: int, bias_std: float = 0.0):
    """A random-init tiny Qwen2 (q/k/v biases); the k_proj bias re-drawn N(0, bias_std²) when bias_std > 0."""
    import transformers

    cfg = transformers.Qwen2Config(
        vocab_size=int(q.vocab_size),
        hidden_size=int(q.hidden_size),
        intermediate_size=int(q.intermediate_size),
        num_hidden_layers=int(q.num_layers),
        num_attention_heads=int(q.num_heads),
        num_key_value_heads=int(q.num_kv_heads),
        head_dim=int(q.head_dim),
        max_position_embeddings=int(q.max_position_embeddings),
        rope_theta=float(q.rope_theta),
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.Qwen2ForCausalLM(cfg).eval()
        if bias_std > 0:
            with torch.no_grad():
                for layer in model.model.layers:
                    layer.self_attn.k_proj.bias.normal_(0.0, bias_std)
    return model


def heldout_blocks(tokenizer: Any, seq_len: int, n: int, val_fraction: float = 0.1):
    """``n`` held-out blocks [n, seq_len] from the pydoc validation topics."""
    from iclr26_core.corpus import lm_dataset

    val = lm_dataset(tokenizer, seq_len=seq_len, val_fraction=val_fraction)["validation"]["input_ids"]
    if len(val) < n:
        raise UserError(f"the held-out text has {len(val)} blocks of {seq_len} tokens, fewer than {n}")
    return val[:n]


def train_blocks(tokenizer: Any, seq_len: int, val_fraction: float = 0.1):
    from iclr26_core.corpus import lm_dataset

    return lm_dataset(tokenizer, seq_len=seq_len, val_fraction=val_fraction)["train"]["input_ids"]


def language_model(cfg: Any, ctx: Any, seed: int) -> tuple[Any, Any, str]:
    """(model, tokenizer, description): the user's model, or the tiny Llama trained here."""
    from iclr26_core.models import load_causal_lm, load_tokenizer
    from iclr26_core.tokenizers import train_bpe
    from iclr26_core.train import train_briefly

    m = cfg.model
    if m.name:
        model = load_causal_lm(str(m.name), dtype=torch.bfloat16 if ctx.device == "cuda" else torch.float32)
        return model.to(ctx.device).eval(), load_tokenizer(str(m.name)), str(m.name)
    tokenizer = train_bpe(int(m.vocab_size))
    model = tiny_llama(m, seed)
    t = cfg.train
    blocks = train_blocks(tokenizer, int(t.seq_len)) if int(t.steps) > 0 else None
    train_briefly(model, blocks, t, seed=seed, device=ctx.device, desc="train tiny llama")
    n = sum(p.numel() for p in model.parameters())
    desc = f"tiny llama ({n / 1e6:.2f}M params, {int(t.steps)} steps x {int(t.batch_size)} x {int(t.seq_len)} tokens)"
    return model.to(ctx.device).eval(), tokenizer, desc
