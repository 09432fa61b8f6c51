"""The W4A4KV4 rotation path: Hadamard orders, function preservation on every family, K quantised after RoPE."""

from __future__ import annotations

import copy
import sys

import pytest
import torch
import transformers

from iclr26_core.errors import UserError
from iclr26_obr import apply_to_model, hadamard_rotate
from iclr26_obr.actquant import add_act_quant, add_kv_quant, remove_act_quant
from iclr26_obr.hadamard import BASE_ORDERS, hadamard_matrix, has_hadamard
from iclr26_obr.rotation import FAMILIES, orthonormal_hadamard

SIZES = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,  # 12·8: a Paley order, as Llama-3's 14336 = 28·512
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
CONFIGS = {
    "llama": transformers.LlamaConfig,
    "mistral": transformers.MistralConfig,
    "qwen2": transformers.Qwen2Config,  # q/k/v biases
    "phi3": transformers.Phi3Config,  # fused qkv_proj and gate_up_proj
}
IDS = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(0))


def family(name: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    extra = {"pad_token_id": 0} if name == "phi3" else {}
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[name](**SIZES, **extra, **kw)).double()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # norm weights and biases away from their trivial initial values
                p.uniform_(0.5, 1.5)
    return model.eval()


@pytest.mark.parametrize("n", [o * 2**k for o in BASE_ORDERS for k in (0, 1)] + [40, 576, 1536])
def test_hadamard_orders(n):
    H = hadamard_matrix(n, torch.float64)
    assert torch.equal(H @ H.t(), n * torch.eye(n, dtype=torch.float64)) and torch.all(H.abs() == 1)


def test_missing_order_is_one_clear_line():
    with pytest.raises(UserError, match="no Hadamard matrix of order 52"):
        hadamard_matrix(52)


def test_paper_model_sizes_have_their_hadamards():
    """Llama-2-7B (intermediate 11008 = 172·64), Llama-3-8B (14336 = 28·512), Llama-1-13B (13824 = 108·128),
    SmolLM2-135M (hidden 576 = 36·16, intermediate 1536 = 12·128), Qwen2-7B (18944 = 148·128), head sizes."""
    for n in (4096, 11008, 14336, 13824, 5120, 576, 1536, 18944, 3584, 128, 64, 96):
        assert has_hadamard(n), n
    assert not has_hadamard(9) and not has_hadamard(52)


@torch.no_grad()
@pytest.mark.parametrize("name", FAMILIES)
def test_rotated_model_equals_the_unrotated_one(name):
    """fp64 weights: offline rotation, + online down_proj/o_proj Hadamards, + per-head q/k Hadamard after RoPE."""
    model = family(name)
    ref = model(input_ids=IDS).logits
    scale = float(ref.abs().max())
    offline = hadamard_rotate(copy.deepcopy(model))
    assert float((offline(input_ids=IDS).logits - ref).abs().max()) < 1e-6 * scale
    att = offline.model.layers[0].self_attn
    v = att.qkv_proj if name == "phi3" else att.v_proj
    assert not torch.allclose(v.weight, model.model.layers[0].self_attn.get_submodule(v_name(name)).weight)
    online = hadamard_rotate(copy.deepcopy(model), online=True)
    add_kv_quant(online, None)  # the q/k Hadamard alone
    assert online.config._attn_implementation.startswith("obr_kv_")
    out = online(input_ids=IDS).logits
    assert float((out - ref).abs().max()) < 1e-6 * scale
    for layer in online.model.layers:  # the online rotations are there and do something
        assert hasattr(layer.mlp.down_proj, "obr_hadamard") and hasattr(
            layer.self_attn.o_proj, "obr_hadamard"
        )
    online.model.layers[0].self_attn.o_proj._forward_pre_hooks.clear()
    assert float((online(input_ids=IDS).logits - ref).abs().max()) > 1e-3 * scale


def v_name(name: str) -> str:
    return "qkv_proj" if name == "phi3" else "v_proj"


@torch.no_grad()
def test_k_is_quantised_after_rope_in_the_hadamard_basis(monkeypatch):
    model = family("llama", attn_implementation="eager")
    hadamard_rotate(model, online=True)
    ref = model(input_ids=IDS).logits
    seen = []
    modeling = sys.modules[type(model.model.layers[0].self_attn).__module__]
    inner = modeling.eager_attention_forward

    def capture(module, q, k, v, mask, **kw):
        seen.append((k, v))
        return inner(module, q, k, v, mask, **kw)

    monkeypatch.setattr(modeling, "eager_attention_forward", capture)
    add_kv_quant(model, 3)
    quant = model(input_ids=IDS).logits
    k, v = seen[0]  # [batch, kv heads, tokens, head size]
    for t in (k, v):  # every (token, head) holds at most 2^3 levels: quantised as the attention reads it
        levels = torch.sort(t, dim=-1).values.diff(dim=-1).ne(0).sum(-1) + 1
        assert int(levels.max()) <= 8
    assert float((quant - ref).abs().max()) > 0
    remove_act_quant(model)
    assert model.config._attn_implementation == "eager"
    seen.clear()
    assert torch.equal(model(input_ids=IDS).logits, ref)
    k_rot = seen[0][0] @ orthonormal_hadamard(k.shape[-1])  # the fp key after RoPE, per-head Hadamard
    assert float((k - k_rot).abs().max()) > 0  # quantised in that basis: within half a 3-bit step
    step = (k_rot.amax(-1, keepdim=True) - k_rot.amin(-1, keepdim=True)) / 7
    assert bool(((k - k_rot).abs() <= step * 0.5 + 1e-9).all())


@torch.no_grad()
def test_w4a4kv4_on_every_family():
    for name in FAMILIES:
        model = family(name).float()
        report = apply_to_model(
            model, IDS, method="obr_rtn", rotate=True, act_bits=4, kv_bits=4, progress=False
        )
        assert len(report.layers) == (8 if name == "phi3" else 14)
        assert torch.isfinite(model(input_ids=IDS).logits).all()
        assert model.obr_kv == {"bits": 4, "qk_hadamard": True, "inner": "sdpa"}
        remove_act_quant(model)
        add_act_quant(model, [], None, None)
        assert not model.config._attn_implementation.startswith("obr_kv_")


def test_kv_quant_refuses_gpt2_before_compressing():
    from iclr26_core.testing import odd_model

    model = odd_model("gpt2")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(UserError, match="Llama family"):
        apply_to_model(model, IDS, kv_bits=4, progress=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
