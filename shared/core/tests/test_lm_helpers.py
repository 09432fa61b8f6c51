"""The miniatures' language-model helpers: `tiny_llama` from a config section, `linear_targets`, `lm_blocks`,
`train_briefly`; each checked against a second computation."""

import pytest
import torch
import transformers
from omegaconf import OmegaConf
from torch import nn

from iclr26_core.corpus import lm_blocks, lm_dataset
from iclr26_core.errors import UserError
from iclr26_core.models import linear_targets, tiny_llama, tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_core.train import TrainConfig, train_briefly, train_lm


def test_tiny_llama_reads_a_config_section():
    cfg = OmegaConf.create(
        dict(hidden_size=36, num_layers=2, num_heads=3, intermediate_size=52, vocab_size=99, seq_len=300)
    )
    model = tiny_llama(cfg, seed=4)
    c = model.config
    got = (
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.intermediate_size,
    )
    assert got == (36, 2, 3, 3, 52) and c.vocab_size == 99 and c.max_position_embeddings == 300
    # the same weights as a hand-built LlamaConfig under the same seed
    ref_cfg = transformers.LlamaConfig(**{**model.config.to_dict()})
    torch.manual_seed(4)
    ref = transformers.LlamaForCausalLM(ref_cfg)
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    gqa = tiny_llama(
        dict(hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, intermediate_size=40, vocab_size=50,
             max_position_embeddings=64, rope_theta=1e4, initializer_range=0.05)
    )  # fmt: skip
    c = gqa.config
    assert (c.num_key_value_heads, c.max_position_embeddings, c.initializer_range) == (2, 64, 0.05)
    assert (
        c.max_position_embeddings == 64
        and tiny_llama(dict(cfg), seed=0).config.max_position_embeddings == 300
    )


def test_linear_targets_skips_names_and_tied_weights():
    gpt2 = tiny_model("gpt2", tie_word_embeddings=True)
    targets, skipped = linear_targets(gpt2, lambda name: name.endswith("mlp.c_proj"))
    # a hand count: per block c_attn, attn.c_proj, c_fc (Conv1D); mlp.c_proj skipped; lm_head tied to wte
    n_layers = gpt2.config.n_layer
    assert [k for _, _, k in targets] == ["conv1d"] * (3 * n_layers)
    reasons = {s["name"]: s["reason"] for s in skipped}
    assert reasons["lm_head"] == "weight tied to an embedding"
    assert sum(r == "matches skip" for r in reasons.values()) == n_layers
    block = gpt2.transformer.h[1]
    inner, _ = linear_targets(gpt2, lambda name: False, within=block, prefix="transformer.h.1")
    assert [n for n, _, _ in inner] == [
        f"transformer.h.1.{s}" for s in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    ]
    assert all(gpt2.get_submodule(n) is m for n, m, _ in inner)
    plain = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert [(n, k) for n, _, k in linear_targets(plain, lambda n: False)[0]] == [
        ("0", "linear"),
        ("2", "linear"),
    ]


def test_lm_blocks_pydoc_and_unknown_data():
    tok = train_bpe(300)
    train, val = lm_blocks(tok, "pydoc", 64)
    ref = lm_dataset(tok, seq_len=64)
    for got, split in ((train, "train"), (val, "validation")):
        assert len(got) == len(ref[split]) > 0
        assert torch.equal(got[0], ref[split][0]["input_ids"]) and torch.equal(
            got[-1], ref[split][-1]["input_ids"]
        )
    with pytest.raises(UserError, match="pydoc or wikitext2"):
        lm_blocks(tok, "c4", 64)


def test_train_briefly_is_train_lm_with_the_sections_settings():
    data = torch.randint(0, 99, (40, 16))
    cfg = OmegaConf.create(dict(steps=3, batch_size=4, lr=1e-2, warmup_steps=1))
    a = tiny_model("llama", vocab_size=99, seed=1)
    b = tiny_model("llama", vocab_size=99, seed=1)
    assert train_briefly(a, data, cfg, seed=2, device="cpu", desc="t") is a
    tc = TrainConfig(steps=3, batch_size=4, lr=1e-2, warmup_steps=1, seed=2, device="cpu", progress=False)
    train_lm(b, data, None, tc)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    c = tiny_model("llama", vocab_size=99, seed=1)
    before = [p.clone() for p in c.parameters()]
    train_briefly(
        c, None, OmegaConf.create(dict(steps=0, batch_size=4, lr=1.0)), seed=0, device="cpu", desc="t"
    )
    assert all(torch.equal(p, q) for p, q in zip(c.parameters(), before, strict=True))
