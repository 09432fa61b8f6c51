"""Raw router logits, the alignment loss, the reference and drift against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_core.models import tiny_model
from iclr26_safemoe import (
    RoutingReference,
    reference_routing,
    register_router,
    router_logits,
    routing_alignment_loss,
    routing_drift,
)
from iclr26_safemoe.toy import PAD


def _manual(model, ids, mask=None):
    """Gate inputs and outputs captured by our own hooks: the independent reference."""
    ins, outs = [], []

    def hook(_module, args, output):
        ins.append(args[0])
        outs.append(output)

    hooks = [layer.mlp.gate.register_forward_hook(hook) for layer in model.model.layers]
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    for h in hooks:
        h.remove()
    return ins, outs


def test_router_logits_equal_hand_recomputation(olmoe):
    ids = torch.randint(0, 60, (3, 7))
    ins, outs = _manual(olmoe, ids)
    with torch.no_grad():
        z = router_logits(olmoe, ids, position="all")  # [B, T, L, E]
    assert z.shape == (3, 7, 2, 8)
    for layer, (h, o) in enumerate(zip(ins, outs, strict=True)):
        w = olmoe.model.layers[layer].mlp.gate.weight
        by_hand = (h.reshape(-1, 64) @ w.T).reshape(3, 7, 8)
        torch.testing.assert_close(z[:, :, layer], by_hand)
        # norm_topk_prob=False: the router's top-k weights are softmax(logits) gathered, not renormalised
        top = torch.softmax(z[:, :, layer].reshape(-1, 8), -1).topk(2, -1).values
        torch.testing.assert_close(top, o[1].float(), rtol=1e-5, atol=1e-6)
        assert not torch.allclose(o[1].sum(-1), torch.ones(21))


def test_last_position_is_independent_of_padding(olmoe):
    seq = torch.randint(0, 30, (1, 6))
    with torch.no_grad():
        alone = router_logits(olmoe, seq)
        right = router_logits(
            olmoe, torch.cat([seq, torch.full((1, 3), PAD)], 1), torch.tensor([[1] * 6 + [0] * 3])
        )
        left = router_logits(
            olmoe, torch.cat([torch.full((1, 3), PAD), seq], 1), torch.tensor([[0] * 3 + [1] * 6])
        )
    assert alone.shape == (1, 2, 8)
    torch.testing.assert_close(right, alone, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(left, alone, rtol=1e-4, atol=1e-5)


def test_mixtral_through_registry():
    model = tiny_model("mixtral", seed=1)
    ids = torch.randint(0, 100, (2, 5))
    ins, _ = _manual(model, ids)
    with torch.no_grad():
        z = router_logits(model, ids)
    assert z.shape == (2, model.config.num_hidden_layers, model.config.num_local_experts)
    last = ins[0].reshape(2, 5, -1)[:, -1] @ model.model.layers[0].mlp.gate.weight.T
    torch.testing.assert_close(z[:, 0], last)


@pytest.mark.parametrize("cfg_name", ["Qwen2MoeConfig", "Qwen3MoeConfig"])
def test_registry_paths_exist_in_installed_transformers(cfg_name):
    """The registry's gate paths must resolve on the installed transformers for every listed family."""
    import transformers

    from iclr26_safemoe import find_gates

    cfg = getattr(transformers, cfg_name)(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=32,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        mlp_only_layers=[],
    )
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    gates = find_gates(model)
    assert [i for i, _ in gates] == [0, 1] and gates[0][1].weight.shape == (4, 32)
    ids = torch.randint(0, 64, (2, 5))
    ins, _ = [], None

    def hook(_m, args, _o):
        ins.append(args[0])

    h = gates[1][1].register_forward_hook(hook)
    with torch.no_grad():
        z = router_logits(model, ids)
    h.remove()
    torch.testing.assert_close(z[:, 1], ins[-1].reshape(2, 5, 32)[:, -1] @ gates[1][1].weight.T)


def test_dense_model_is_refused_in_one_line():
    with pytest.raises(UserError, match=r"no MoE router found.*supported: .*see register_router") as e:
        router_logits(tiny_model("llama"), torch.zeros(1, 3, dtype=torch.long))
    assert "\n" not in str(e.value)


def test_register_router_enables_a_new_architecture(monkeypatch):
    from iclr26_safemoe import registry

    # the registration is undone after the test: other modules' tests compare the registry with their own list
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    model = tiny_model("mixtral")
    model.config.model_type = "my_moe"
    with pytest.raises(UserError):
        router_logits(model, torch.zeros(1, 3, dtype=torch.long))
    register_router("my_moe", "model.layers", "mlp.gate")
    assert router_logits(model, torch.zeros(1, 3, dtype=torch.long)).shape[1] == 2


def _np_kl(cur, ref, tau):
    def log_softmax(x):
        x = x / tau
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    lp, lq = log_softmax(ref), log_softmax(cur)
    return float((np.exp(lp) * (lp - lq)).sum() / cur.shape[0])


@pytest.mark.parametrize("tau", [0.1, 1.0, 3.0])
def test_alignment_loss_equals_numpy_kl(tau):
    g = np.random.default_rng(0)
    cur, ref = g.normal(size=(5, 3, 8)), g.normal(size=(5, 3, 8))
    ours = routing_alignment_loss(torch.tensor(cur), torch.tensor(ref), tau)
    assert float(ours) == pytest.approx(_np_kl(cur, ref, tau), rel=1e-5)


def test_alignment_loss_zero_and_temperature():
    g = torch.Generator().manual_seed(0)
    z, r = torch.randn(4, 2, 8, generator=g), torch.randn(4, 2, 8, generator=g)
    assert float(routing_alignment_loss(r.clone(), r)) == pytest.approx(0.0, abs=1e-6)
    # KL(softmax(r/τ)‖softmax(z/τ)) depends on (r, z, τ) only through r/τ and z/τ
    assert float(routing_alignment_loss(3 * z, 3 * r, 0.3)) == pytest.approx(
        float(routing_alignment_loss(z, r, 0.1)), rel=1e-5
    )
    # a sharper temperature magnifies the divergence of different logits; τ → ∞ sends it to 0
    assert (
        float(routing_alignment_loss(z, r, 0.1))
        > float(routing_alignment_loss(z, r, 1.0))
        > float(routing_alignment_loss(z, r, 100.0))
    )
    assert float(routing_alignment_loss(z, r, 1e4)) < 1e-6
    with pytest.raises(UserError, match="tau must be > 0"):
        routing_alignment_loss(z, r, 0.0)


def test_reference_round_trip_and_mismatch(olmoe, tmp_path):
    inputs = {"input_ids": torch.randint(0, 60, (5, 9)), "attention_mask": torch.ones(5, 9, dtype=torch.long)}
    ref = reference_routing(olmoe, inputs, batch_size=2)
    assert ref.logits.shape == (5, 2, 8)
    path = ref.save(tmp_path / "ref.safetensors")
    back = RoutingReference.load(path)
    torch.testing.assert_close(back.logits, ref.logits)
    assert back.meta == ref.meta
    back.check(olmoe)
    d = routing_drift(olmoe, inputs, back)
    assert d["kl"] == pytest.approx(0.0, abs=1e-5) and d["topk_jaccard"] == [1.0, 1.0]
    from iclr26_safemoe.toy import tiny_olmoe

    for other in (tiny_olmoe(num_experts=4), tiny_olmoe(num_hidden_layers=3)):
        with pytest.raises(UserError, match="reference is from another model") as e:
            back.check(other)
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="exists"):
        ref.save(path)


def test_drift_matches_brute_force(olmoe):
    inputs = {"input_ids": torch.randint(0, 60, (4, 9)), "attention_mask": torch.ones(4, 9, dtype=torch.long)}
    ref = torch.randn(4, 2, 8)
    d = routing_drift(olmoe, inputs, ref, tau=1.0)
    with torch.no_grad():
        cur = router_logits(olmoe, inputs["input_ids"])
    kl = [
        [_np_kl(cur[i : i + 1, j].numpy(), ref[i : i + 1, j].numpy(), 1.0) for j in range(2)]
        for i in range(4)
    ]
    assert d["kl"] == pytest.approx(float(np.sum(kl, 1).mean()), rel=1e-4)
    jac = [
        np.mean(
            [
                len(set(ref[i, j].topk(2).indices.tolist()) & set(cur[i, j].topk(2).indices.tolist()))
                / len(set(ref[i, j].topk(2).indices.tolist()) | set(cur[i, j].topk(2).indices.tolist()))
                for i in range(4)
            ]
        )
        for j in range(2)
    ]
    assert d["topk_jaccard"] == pytest.approx(jac)
