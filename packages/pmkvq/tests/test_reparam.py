"""The reparameterisation preserves the function; λ is tied over RoPE pairs; PI positions; errors."""

from __future__ import annotations

import copy

import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_pmkvq import RepScales, calibrate_reparameterization, pi_position_ids
from iclr26_pmkvq.arch import check_supported
from iclr26_pmkvq.decoding import fp_logits


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3", "qwen3"])
def test_apply_keeps_the_logits_and_ties_lambda_within_rope_pairs(tiny, arch, tmp_path):
    model = tiny[arch]()
    ids = torch.randint(3, 100, (2, 40), generator=torch.Generator().manual_seed(0))
    rep = calibrate_reparameterization(model, [ids[:1]], effective_len=160, grid=5)
    assert set(rep.alphas) <= {1.0, 0.8, 0.6, 0.4, 0.2}
    shape = check_supported(model)
    d, r = shape.head_dim, shape.rotary_dim
    assert r == (8 if arch == "phi3" else 16)
    for lam in rep.lambdas:
        assert lam.shape == (2, d)
        assert torch.equal(lam[:, : r // 2], lam[:, r // 2 : r])  # tied over the rotated pairs
        assert (lam >= 1e-4).all() and (lam <= 1e4).all()
        if arch == "qwen3":  # one λ for all heads (shared norm weights)
            assert torch.equal(lam[0], lam[1])
    if arch == "phi3":  # the non-rotated channels are free: their λ differ from their mirror channels
        assert not torch.equal(rep.lambdas[0][:, r:], rep.lambdas[0][:, r // 2 : r])
    new = rep.apply(copy.deepcopy(model))
    assert any(
        not torch.equal(a, b)
        for a, b in zip(new.model.layers[0].parameters(), model.model.layers[0].parameters())
    )
    assert (fp_logits(new, ids) - fp_logits(model, ids)).abs().max() < 1e-4
    rep.save(tmp_path / "rep.safetensors")
    back = RepScales.load(tmp_path / "rep.safetensors")
    assert back.alphas == rep.alphas and back.effective_len == 160
    assert all(torch.equal(a, b) for a, b in zip(back.lambdas, rep.lambdas))


def test_reparameterisation_lowers_the_quantised_attention_error(tiny):
    model = tiny["qwen2"]()
    ids = torch.randint(3, 100, (1, 64), generator=torch.Generator().manual_seed(1))
    rep = calibrate_reparameterization(model, [ids], effective_len=None, grid=20)
    for errs, alpha in zip(rep.mse, rep.alphas):
        assert errs[alpha] == min(errs.values())


def test_alpha_search_scores_the_error_after_o_proj(tiny):
    """The α search's error is the MSE of the attention module's output (after o_proj), recomputed here for
    block 0 from a forward hook on the real module with RTN-quantised K and V patched into the cache."""
    from iclr26_pmkvq.arch import capture_qkv
    from iclr26_pmkvq.quantizer import fake_quantize
    from iclr26_pmkvq.reparam import lambdas

    model = tiny["llama"]()
    ids = torch.randint(3, 100, (1, 32), generator=torch.Generator().manual_seed(2))
    rep = calibrate_reparameterization(model, [ids], effective_len=None, grid=4)
    attn = model.model.layers[0].self_attn
    q, k, v = capture_qkv(model, ids)[0]
    shape = check_supported(model)
    lam = lambdas(k.abs().amax(dim=(0, 2)), 0.5)[None, :, None, :]
    kq, vq = fake_quantize(k / lam, 4) * lam, fake_quantize(v, 4)  # (Qλ)(K/λ)ᵀ = Q (λ·K/λ)ᵀ

    def attn_out(kk, vv):
        rep_ = shape.n_heads // shape.n_kv_heads
        w = torch.softmax(
            (q @ kk.repeat_interleave(rep_, 1).transpose(-1, -2)) * shape.scaling
            + torch.full((32, 32), float("-inf")).triu(1),
            -1,
        )
        heads = w @ vv.repeat_interleave(rep_, 1)
        return attn.o_proj(heads.transpose(1, 2).reshape(1, 32, -1))

    with torch.no_grad():
        want = float((attn_out(kq, vq) - attn_out(k, v)).square().mean())
    assert abs(rep.mse[0][0.5] - want) <= 1e-6 * max(want, 1e-12) + 1e-12


def test_pi_position_ids():
    assert torch.equal(pi_position_ids(6, 24)[0], torch.arange(6) * 4)
    assert torch.equal(pi_position_ids(6, None)[0], torch.arange(6))
    assert pi_position_ids(2048, 8192, batch=3).shape == (3, 2048)


def test_unsupported_architecture_is_one_clear_error():
    from iclr26_core.models import tiny_model

    with pytest.raises(UserError, match="supports llama, qwen2, mistral"):
        calibrate_reparameterization(tiny_model("gpt2"), [torch.zeros(1, 4, dtype=torch.long)])


@pytest.mark.parametrize("arch", ["phi3", "qwen3"])
def test_pm_kvq_on_fused_qkv_and_qk_norm_families(tiny, arch):
    from iclr26_pmkvq import pm_kvq
    from iclr26_pmkvq.decoding import greedy

    model = tiny[arch]()
    ref = copy.deepcopy(model)
    ids = torch.randint(3, 100, (1, 32), generator=torch.Generator().manual_seed(3))
    plan = pm_kvq(
        model, [ids], budget_mb=5120 / 2**20, max_len=64, effective_len=128, window=8
    )  # one 4, one 2
    assert sorted(plan.bits) == [2, 4] and len(plan.alphas) == 2
    assert (fp_logits(model, ids) - fp_logits(ref, ids)).abs().max() < 1e-4  # reparameterised, same function
    out = greedy(model, ids[:, :8], 24, plan.cache())
    assert out.shape == (1, 24)
