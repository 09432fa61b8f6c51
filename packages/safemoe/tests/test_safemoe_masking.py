"""`mask_experts` on every registered architecture, against its own router and a hand-written routing rule.

With an empty mask the wrapped gate must return exactly what the architecture's router returns; with experts
masked, the selection must exclude them and the weights must follow that architecture's routing function
(softmax → top-k [→ renormalise] for OLMoE/Qwen/Mixtral, top-k → softmax for gpt-oss, softmax · scale for
DeepSeek-V2, sigmoid + correction-bias selection · scale for DeepSeek-V3), recomputed here by hand.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError
from iclr26_safemoe import find_gates, mask_experts
from iclr26_safemoe.finetune import default_lora, wrap_lora
from iclr26_safemoe.registry import lora_defaults, supported

E, K = 8, 2
_COMMON = dict(
    vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2
)
_DS = dict(
    intermediate_size=32,
    moe_intermediate_size=16,
    n_routed_experts=E,
    num_experts_per_tok=K,
    first_k_dense_replace=1,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=8,
    n_shared_experts=1,
)
_QWEN = dict(
    intermediate_size=32,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=16,
    num_experts=E,
    num_experts_per_tok=K,
    decoder_sparse_step=1,
    mlp_only_layers=[],
)
CONFIGS = {
    "olmoe": ("OlmoeConfig", dict(intermediate_size=32, num_experts=E, num_experts_per_tok=K)),
    "mixtral": ("MixtralConfig", dict(intermediate_size=32, num_local_experts=E, num_experts_per_tok=K)),
    "qwen2_moe": ("Qwen2MoeConfig", dict(_QWEN, norm_topk_prob=False)),
    "qwen3_moe": ("Qwen3MoeConfig", dict(_QWEN, norm_topk_prob=True)),
    "gpt_oss": (
        "GptOssConfig",
        dict(intermediate_size=32, num_local_experts=E, num_experts_per_tok=K, head_dim=16, sliding_window=8),
    ),
    "deepseek_v2": (
        "DeepseekV2Config",
        dict(_DS, q_lora_rank=None, n_group=1, topk_group=1, topk_method="greedy", routed_scaling_factor=1.5),
    ),
    "deepseek_v3": (
        "DeepseekV3Config",
        dict(_DS, q_lora_rank=16, n_group=1, topk_group=1, routed_scaling_factor=2.5),
    ),
}


def _model(model_type: str, **extra):
    import transformers

    name, kw = CONFIGS[model_type]
    cfg = getattr(transformers, name)(**_COMMON, **{**kw, **extra})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():  # routers with a spread (some archs initialise them to zero), biases non-zero
        for _, gate in find_gates(model):
            gate.weight.normal_(0, 0.5)
            for buf in ("bias", "e_score_correction_bias"):
                if torch.is_tensor(getattr(gate, buf, None)):
                    getattr(gate, buf).normal_(0, 0.3)
    return model


def _gate_io(model, ids):
    """[(gate input [N, H], (logits, weights, indices))] per MoE layer, and the model's output logits."""
    seen = []
    hooks = [g.register_forward_hook(lambda _m, a, o: seen.append((a[0], o))) for _, g in find_gates(model)]
    with torch.no_grad():
        out = model(input_ids=ids).logits
    for h in hooks:
        h.remove()
    return seen, out


def _by_hand(model_type: str, gate, h: torch.Tensor, masked: list[int]):
    """(weights, indices) of the architecture's routing rule on the masked logits, computed here."""
    h = h.reshape(-1, h.shape[-1]).float()
    z = F.linear(h, gate.weight.float(), getattr(gate, "bias", None))
    z[:, masked] = float("-inf")
    if model_type == "gpt_oss":
        v, i = z.topk(K, -1)
        return v.softmax(-1), i
    if model_type == "deepseek_v3":
        s = z.sigmoid()
        bias = gate.e_score_correction_bias.clone()
        bias[masked] = float("-inf")
        i = (s + bias).topk(K, -1).indices
        w = s.gather(1, i)
        w = w / (w.sum(-1, keepdim=True) + 1e-20) if gate.norm_topk_prob else w
        return w * gate.routed_scaling_factor, i
    v, i = z.softmax(-1).topk(K, -1)
    if model_type == "deepseek_v2":
        return v * gate.routed_scaling_factor, i
    norm = model_type == "mixtral" or bool(getattr(gate, "norm_topk_prob", False))
    return (v / v.sum(-1, keepdim=True) if norm else v), i


def _sorted(w, i):
    order = i.argsort(-1)
    return w.gather(-1, order).float(), i.gather(-1, order)


def test_every_registered_architecture_is_covered():
    assert set(CONFIGS) == set(supported())


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_mask_experts_follows_each_architectures_router(model_type):
    model = _model(model_type)
    ids = torch.randint(0, 64, (4, 6), generator=torch.Generator().manual_seed(1))
    gates = find_gates(model)
    plain, out = _gate_io(model, ids)
    # the empty mask runs the same wrapped path and must give the router's own output, bit for bit
    with mask_experts(model, [[] for _ in gates]):
        empty, out_empty = _gate_io(model, ids)
    torch.testing.assert_close(out_empty, out, rtol=0, atol=0)
    for (_, a), (_, b) in zip(plain, empty, strict=True):
        assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    # mask the two experts each layer uses most: they must vanish, the weights follow the hand rule
    masked = [torch.bincount(o[2].flatten(), minlength=E).topk(2).indices.tolist() for _, o in plain]
    with mask_experts(model, masked):
        seen, out_masked = _gate_io(model, ids)
    assert not torch.allclose(out_masked, out)
    for (_, gate), (h, o), m in zip(gates, seen, masked, strict=True):
        assert not torch.isin(o[2], torch.tensor(m)).any()
        w, i = _by_hand(model_type, gate, h, m)
        got_w, got_i = _sorted(o[1], o[2])
        want_w, want_i = _sorted(w, i)
        assert torch.equal(got_i, want_i)
        torch.testing.assert_close(got_w, want_w, rtol=1e-5, atol=1e-6)
        if model_type == "gpt_oss":  # its router renormalises over the top-k: the 0.1 bug summed to ~0.7
            torch.testing.assert_close(o[1].sum(-1), torch.ones(o[1].shape[0]))
    _, out_after = _gate_io(model, ids)  # restored on exit
    torch.testing.assert_close(out_after, out, rtol=0, atol=0)
    assert all("forward" not in g.__dict__ for _, g in gates)
    if model_type == "deepseek_v3":
        assert torch.isfinite(gates[0][1].e_score_correction_bias).all()


def test_group_limited_deepseek_never_selects_masked_experts():
    """DeepSeek-V2/V3 with group-limited routing (2 groups, 1 kept): masked experts are never chosen."""
    for model_type, extra in (
        ("deepseek_v2", dict(n_group=2, topk_group=1, topk_method="group_limited_greedy")),
        ("deepseek_v3", dict(n_group=2, topk_group=1)),
    ):
        model = _model(model_type, **extra)
        ids = torch.randint(0, 64, (4, 6), generator=torch.Generator().manual_seed(2))
        plain, _ = _gate_io(model, ids)
        masked = [torch.bincount(o[2].flatten(), minlength=E).topk(2).indices.tolist() for _, o in plain]
        with mask_experts(model, masked):
            seen, out = _gate_io(model, ids)
        assert torch.isfinite(out).all()
        for (_, o), m in zip(seen, masked, strict=True):
            assert not torch.isin(o[2], torch.tensor(m)).any()


def test_mask_experts_refuses_bad_masks(olmoe):
    with pytest.raises(UserError, match=r"expert ids must be in 0\.\.7"), mask_experts(olmoe, [[8], [0]]):
        pass
    with pytest.raises(UserError, match="leaves < top-k"), mask_experts(olmoe, [list(range(7)), [0]]):
        pass
    assert all("forward" not in g.__dict__ for _, g in find_gates(olmoe))


# LoRA targets: every registered architecture's defaults exist; DeepSeek's low-rank queries are adapted; a
# configured target that matches no module is refused with one line (peft only fails when none matches).


def _adapted(peft_model) -> set[str]:
    return {
        n.split(".lora_A")[0].rsplit(".", 1)[-1] for n, _ in peft_model.named_parameters() if ".lora_A." in n
    }


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_every_default_target_is_adapted(model_type):
    model = _model(model_type)
    targets, _ = lora_defaults(model)
    assert _adapted(wrap_lora(model)) == set(targets)


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3"])
def test_deepseek_queries_follow_q_lora_rank(model_type):
    low_rank = _model(model_type, q_lora_rank=16)
    assert {"q_a_proj", "q_b_proj"} <= _adapted(wrap_lora(low_rank))
    assert "q_proj" not in {n.rsplit(".", 1)[-1] for n, _ in low_rank.named_modules()}
    full = _model(model_type, q_lora_rank=None)
    assert "q_proj" in _adapted(wrap_lora(full))


def test_a_target_matching_nothing_is_refused():
    model = _model("deepseek_v3", q_lora_rank=16)
    lora = default_lora(model)
    lora.target_modules = {"q_proj", "o_proj"}  # q_proj does not exist when q_lora_rank is set
    with pytest.raises(UserError, match=r"LoRA target\(s\) q_proj match no module.*q_a_proj"):
        wrap_lora(model, lora)
    lora.target_modules = r".*\.nothing_here"
    with pytest.raises(UserError, match="matches no module"):
        wrap_lora(_model("olmoe"), lora)
