"""∂L/∂K post-RoPE captured through the calibration Cache vs autograd of a hand-written 1-block Llama."""

from __future__ import annotations

import math

import torch

from iclr26_pmkvq import kv_sensitivity
from iclr26_pmkvq.quantizer import fake_quantize
from iclr26_pmkvq.sensitivity import kv_gradients


def _rope(x, pos, theta):
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = pos[:, None].float() * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def _manual_loss(model, ids, pos):
    """Loss of a 1-block Llama written out by hand; returns (loss, K leaf, V leaf)."""
    cfg, layer = model.config, model.model.layers[0]
    att = layer.self_attn
    d = cfg.hidden_size // cfg.num_attention_heads
    hq, hk = cfg.num_attention_heads, cfg.num_key_value_heads
    t = ids.shape[1]
    x = model.model.embed_tokens(ids)
    h = layer.input_layernorm(x)
    q = _rope(att.q_proj(h).view(1, t, hq, d).transpose(1, 2), pos, cfg.rope_parameters["rope_theta"])
    k = _rope(att.k_proj(h).view(1, t, hk, d).transpose(1, 2), pos, cfg.rope_parameters["rope_theta"])
    v = att.v_proj(h).view(1, t, hk, d).transpose(1, 2)
    k_leaf, v_leaf = k.detach().requires_grad_(True), v.detach().requires_grad_(True)
    kk, vv = k_leaf.repeat_interleave(hq // hk, 1), v_leaf.repeat_interleave(hq // hk, 1)
    scores = q @ kk.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    o = (scores.softmax(-1) @ vv).transpose(1, 2).reshape(1, t, hq * d)
    x = x + att.o_proj(o)
    x = x + layer.mlp(layer.post_attention_layernorm(x))
    logits = model.lm_head(model.model.norm(x))
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])
    return loss, k_leaf, v_leaf


def test_captured_gradients_equal_a_direct_recomputation(tiny):
    model = tiny["llama"](num_hidden_layers=1)
    ids = torch.randint(3, 500, (1, 24), generator=torch.Generator().manual_seed(0))
    for eff in (None, 96):  # plain positions and PI stride 4
        loss, grads = kv_gradients(model, ids, eff)
        pos = torch.arange(24) * (1 if eff is None else 4)
        ref_loss, k, v = _manual_loss(model, ids, pos)
        gk, gv = torch.autograd.grad(ref_loss, [k, v])
        assert abs(loss - float(ref_loss.detach())) < 1e-5
        assert torch.allclose(grads[0][0], k.detach(), atol=1e-5)
        assert torch.allclose(grads[0][1], gk, atol=1e-6, rtol=1e-4)
        assert torch.allclose(grads[0][3], gv, atol=1e-6, rtol=1e-4)
    assert all(p.requires_grad for p in model.parameters()) and all(
        p.grad is None for p in model.parameters()
    )


def test_sensitivity_follows_the_formula_and_falls_with_bits(tiny):
    model = tiny["llama"]()
    batches = [torch.randint(3, 500, (1, 32), generator=torch.Generator().manual_seed(s)) for s in (1, 2)]
    sens = kv_sensitivity(model, batches, (8, 4, 2))
    assert sens.shape == (2, 3)
    assert (sens[:, 0] < sens[:, 1]).all() and (sens[:, 1] < sens[:, 2]).all()
    # block 1, 4 bit, by hand from the captured states
    want = 0.0
    for ids in batches:
        _, g = kv_gradients(model, ids)
        k, gk, v, gv = g[1]
        want += float(
            (gk * (k - fake_quantize(k, 4))).abs().mean() + (gv * (v - fake_quantize(v, 4))).abs().mean()
        )
    assert float(sens[1, 1]) == pytest_approx(want / 2)


def pytest_approx(x):
    import pytest

    return pytest.approx(x, rel=1e-9)
