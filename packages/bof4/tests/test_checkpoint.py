"""A user's model: packed checkpoints in one call each way (built on the meta device), dtypes, layer-by-layer
quantisation without a second full copy, and LoRA (peft) on top of a packed model."""

from __future__ import annotations

import gc
import weakref

import peft
import pytest
import torch
import transformers

import iclr26_bof4
from iclr26_bof4 import BOF4Linear, apply_to_model, from_pretrained, load_lora, lora_config, save_pretrained
from iclr26_core.errors import UserError
from iclr26_core.models import load_causal_lm, load_tokenizer, tiny_model
from iclr26_core.tokenizers import train_bpe


@pytest.fixture(scope="module")
def user_model(tmp_path_factory):
    """A tiny llama + its tokenizer saved to a folder, as a user's model arrives."""
    d = tmp_path_factory.mktemp("user") / "tiny-llama"
    tiny_model("llama", vocab_size=300, seed=3).save_pretrained(d)
    train_bpe(300).save_pretrained(d)
    return d


def _ids():
    return torch.randint(0, 300, (2, 13), generator=torch.Generator().manual_seed(0))


def test_packed_round_trip_in_one_call_each_way(user_model, tmp_path, monkeypatch):
    model = load_causal_lm(str(user_model))
    apply_to_model(model, mode="packed")
    with torch.no_grad():
        expected = model(_ids()).logits
    out = save_pretrained(model, tmp_path / "q", tokenizer=load_tokenizer(str(user_model)))
    assert {p.name for p in out.iterdir()} >= {"bof4_quant_config.json", "config.json", "model.safetensors"}
    assert (out / "tokenizer.json").is_file()

    built_on = []
    original_init = transformers.LlamaForCausalLM.__init__

    def spy(self, config):  # record where the architecture's parameters are created
        original_init(self, config)
        built_on.extend({p.device.type for p in self.parameters()})

    monkeypatch.setattr(transformers.LlamaForCausalLM, "__init__", spy)
    loaded = from_pretrained(out)
    assert set(built_on) == {"meta"}  # no full-precision model was materialised first
    assert isinstance(loaded.model.layers[0].mlp.down_proj, BOF4Linear) and not loaded.training
    assert not any(t.is_meta for t in [*loaded.parameters(), *loaded.buffers()])
    with torch.no_grad():
        assert torch.equal(loaded(_ids()).logits, expected)
    with pytest.raises(UserError, match="not empty"):
        save_pretrained(model, out)


def test_from_pretrained_dtype_and_fake_checkpoints(user_model, tmp_path):
    model = load_causal_lm(str(user_model))
    apply_to_model(model, mode="packed")
    save_pretrained(model, tmp_path / "packed")
    bf16 = from_pretrained(tmp_path / "packed", dtype="bfloat16", device_map="cpu")
    layer = bf16.model.layers[1].self_attn.q_proj
    assert bf16.model.embed_tokens.weight.dtype == torch.bfloat16
    assert layer.codes.dtype == torch.uint8 and layer.scales.dtype == torch.float16  # codes keep theirs
    with torch.no_grad():
        assert torch.isfinite(bf16(_ids()).logits.float()).all()
    fake = load_causal_lm(str(user_model))
    apply_to_model(fake, mode="fake")
    save_pretrained(fake, tmp_path / "fake")
    again = from_pretrained(tmp_path / "fake")
    assert type(again.model.layers[0].mlp.up_proj) is torch.nn.Linear
    assert again.bof4_quant_config["config"]["mode"] == "fake"
    with torch.no_grad():
        assert torch.equal(again(_ids()).logits, fake(_ids()).logits)


def test_packed_quantisation_releases_each_float_weight(monkeypatch):
    model = tiny_model("llama")
    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"]
    refs = {n: weakref.ref(model.get_submodule(n).weight) for n in names}
    done: list[str] = []
    real = iclr26_bof4.model.quantize

    def checked(weight, *args, **kwargs):
        if len(done) in (7, 13):  # half-way and at the last layer (a collection costs seconds on a busy heap)
            gc.collect()
            alive = [n for n in done if refs[n]() is not None]
            assert not alive, f"float weights of replaced layers still held: {alive}"
        done.append(names[len(done)])
        return real(weight, *args, **kwargs)

    monkeypatch.setattr(iclr26_bof4.model, "quantize", checked)
    apply_to_model(model, mode="packed")
    assert len(done) == len(names) == 14


def test_lora_on_a_packed_model(user_model, tmp_path):
    base = load_causal_lm(str(user_model))
    apply_to_model(base, mode="packed")
    save_pretrained(base, tmp_path / "q")
    model = from_pretrained(tmp_path / "q")
    codes = model.model.layers[0].self_attn.q_proj.codes.clone()
    with torch.no_grad():
        before = model(_ids()).logits
    peft_model = peft.get_peft_model(
        model, lora_config(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    wrapped = peft_model.base_model.model.model.layers[0].self_attn.q_proj
    assert isinstance(wrapped.base_layer, BOF4Linear)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    with torch.no_grad():
        assert torch.allclose(peft_model(_ids()).logits, before)  # B = 0 at init: the packed model's output
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    ids = _ids()
    losses = []
    peft_model.train()
    for _ in range(5):
        loss = peft_model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
    assert torch.equal(wrapped.base_layer.codes, codes)  # the 4-bit base stays frozen
    peft_model.eval()
    with torch.no_grad():
        tuned = peft_model(_ids()).logits
    assert not torch.allclose(tuned, before)
    peft_model.save_pretrained(tmp_path / "adapter")
    reloaded = load_lora(from_pretrained(tmp_path / "q"), str(tmp_path / "adapter"))
    with torch.no_grad():
        assert torch.allclose(reloaded(_ids()).logits, tuned, atol=1e-6)
    with pytest.raises(UserError, match="re-quantise"):
        peft_model.merge_and_unload()
