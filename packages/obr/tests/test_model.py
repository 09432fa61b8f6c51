"""apply_to_model on tiny real transformers models: Llama (odd sizes), GPT-2 (Conv1D), Qwen2 (tied embeddings)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
import transformers

from iclr26_core.errors import UserError
from iclr26_core.models import tiny_model
from iclr26_core.testing import odd_model
from iclr26_obr import apply_to_model, hadamard_rotate
from iclr26_obr.actquant import add_act_quant, quantize_groups_asym, quantize_per_token, remove_act_quant

IDS = torch.randint(3, 99, (8, 24), generator=torch.Generator().manual_seed(0))


def _targets(model):
    from transformers.pytorch_utils import Conv1D

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear | Conv1D) and "lm_head" not in name:
            w = mod.weight.t() if isinstance(mod, Conv1D) else mod.weight
            yield name, w.detach()


@pytest.mark.parametrize("name", ["llama", "gpt2"])
@pytest.mark.parametrize("method", ["obr_gptq", "sparsegpt_gptq"])
def test_every_target_sparse_and_quantised(name, method):
    model = odd_model(name)
    head = model.lm_head.weight.detach().clone()
    emb = model.get_input_embeddings().weight.detach().clone()
    report = apply_to_model(model, IDS, method=method, progress=False)
    targets = dict(_targets(model))
    assert len(report.layers) == len(targets) == (14 if name == "llama" else 8)
    for lname, w in targets.items():
        keep = report.masks[lname]
        assert abs((1 - keep.float().mean()) - 0.5) < 0.03, lname  # 50 % of the mask (SparseGPT: per block)
        assert torch.all(w[~keep] == 0), lname  # pruned weights are exactly zero after quantisation
        assert float((w == 0).float().mean()) >= 0.5 - 0.03, lname
        assert max(row.unique().numel() for row in w) <= 16, lname
    assert torch.equal(model.lm_head.weight, head) and torch.equal(model.get_input_embeddings().weight, emb)
    assert torch.isfinite(model(input_ids=IDS[:2]).logits).all()
    d = report.to_dict()
    json.dumps(d)
    assert 0 < d["totals"]["mean_output_error"] < 1 and abs(d["totals"]["sparsity"] - 0.5) < 0.02


def test_llama_order_is_qkv_o_gateup_down():
    report = apply_to_model(odd_model("llama"), IDS, method="obr_rtn", progress=False)
    leaves = [r.name.split(".")[-1] for r in report.layers[:7]]
    assert leaves == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def test_two_four_and_bits_on_a_model():
    model = odd_model("llama")
    apply_to_model(model, IDS, method="obr_gptq", nm="2:4", bits=3, progress=False)
    for _, w in _targets(model):
        assert bool(((w != 0).reshape(w.shape[0], -1, 4).sum(-1) <= 2).all())
        assert max(row.unique().numel() for row in w) <= 8


def test_compressed_layers_see_compressed_inputs():
    """Layer-sequential: layer 1's Hessian comes from layer 0 already compressed, so results differ from
    compressing every layer on the dense model's inputs."""
    a, b = odd_model("llama"), odd_model("llama")
    apply_to_model(a, IDS, method="obr_rtn", progress=False)
    ref = odd_model("llama")
    report_b = apply_to_model(b, IDS, method="obr_rtn", progress=False)
    assert report_b.layers[0].output_error == pytest.approx(
        apply_to_model(ref, IDS, method="obr_rtn", progress=False).layers[0].output_error
    )
    w_a = a.model.layers[1].mlp.down_proj.weight
    assert torch.equal(w_a, b.model.layers[1].mlp.down_proj.weight)  # deterministic


@torch.no_grad()
def test_hadamard_rotate_keeps_logits():
    model = tiny_model("llama", "tiny", seed=1)
    ids = IDS % 500
    ref = model(input_ids=ids).logits
    rot = hadamard_rotate(copy.deepcopy(model))
    assert float((rot(input_ids=ids).logits - ref).abs().max()) < 1e-4
    assert torch.all(rot.model.layers[0].input_layernorm.weight == 1)
    online = tiny_model("llama", "tiny", seed=1, intermediate_size=256)
    ref2 = online(input_ids=ids).logits
    hadamard_rotate(online, online=True)
    assert float((online(input_ids=ids).logits - ref2).abs().max()) < 1e-4


@torch.no_grad()
def test_qwen2_tied_embeddings_rotate_and_compress():
    cfg = transformers.Qwen2Config(
        vocab_size=99,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    ref = model(input_ids=IDS).logits
    hadamard_rotate(model)
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    assert float((model(input_ids=IDS).logits - ref).abs().max()) < 1e-4
    report = apply_to_model(model, IDS, method="obr_gptq", progress=False)
    assert len(report.layers) == 14 and torch.isfinite(model(input_ids=IDS).logits).all()


def test_rotate_refuses_gpt2_and_leaves_it_alone():
    model = odd_model("gpt2")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(UserError, match="Llama family"):
        apply_to_model(model, IDS, rotate=True, progress=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@torch.no_grad()
def test_activation_and_kv_quantisation_hooks():
    model = tiny_model("llama", "tiny", seed=2, intermediate_size=256)
    ids = IDS % 500
    apply_to_model(model, ids, method="obr_rtn", rotate=True, act_bits=4, kv_bits=4, progress=False)
    quant = model(input_ids=ids).logits
    assert torch.isfinite(quant).all() and len(model.obr_act_hooks) == 14  # K/V: in the attention call
    assert hasattr(model.model.layers[0].mlp.down_proj, "obr_hadamard")  # online rotation before down_proj
    remove_act_quant(model)
    plain = model(input_ids=ids).logits
    assert float((quant - plain).abs().max()) > 1e-3  # the hooks did change the activations
    add_act_quant(model, [], None, 8)
    assert 0 < float((model(input_ids=ids).logits - plain).abs().max()) < 0.5  # 8-bit KV: a small change
    remove_act_quant(model)
    assert torch.equal(model(input_ids=ids).logits, plain)


def test_quantisers_of_activations_against_numpy():
    x = torch.randn(3, 5, 256, dtype=torch.float64)
    q = quantize_per_token(x, 4)
    s = x.abs().amax(-1, keepdim=True).numpy() / 7
    np.testing.assert_allclose(q.numpy(), np.clip(np.round(x.numpy() / s), -8, 7) * s)
    g = quantize_groups_asym(x, 4, 128).numpy().reshape(3, 5, 2, 128)
    xs = x.numpy().reshape(3, 5, 2, 128)
    lo, hi = xs.min(-1, keepdims=True), xs.max(-1, keepdims=True)
    sc = (hi - lo) / 15
    z = np.round(-lo / sc)
    np.testing.assert_allclose(g, (np.clip(np.round(xs / sc) + z, 0, 15) - z) * sc)


def test_bad_calibration_input():
    with pytest.raises(UserError, match=r"\[N, T\]"):
        apply_to_model(odd_model("llama"), torch.zeros(4, dtype=torch.long), progress=False)
    with pytest.raises(UserError, match="no calibration batches"):
        apply_to_model(odd_model("llama"), [], progress=False)
