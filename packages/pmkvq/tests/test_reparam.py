"""The reparameterisation preserves the function; λ is tied over RoPE pairs; PI positions; errors."""

from __future__ import annotations

import copy

import pytest
import torch

from iclr26_core.errors import UserError
from iclr26_pmkvq import RepScales, calibrate_reparameterization, pi_position_ids
from iclr26_pmkvq.arch import check_supported
from iclr26_pmkvq.decoding import fp_logits


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_apply_keeps_the_logits_and_ties_lambda_within_rope_pairs(tiny, arch, tmp_path):
    model = tiny[arch]()
    ids = torch.randint(3, 100, (2, 40), generator=torch.Generator().manual_seed(0))
    rep = calibrate_reparameterization(model, [ids[:1]], effective_len=160, grid=5)
    assert set(rep.alphas) <= {1.0, 0.8, 0.6, 0.4, 0.2}
    d = check_supported(model).head_dim
    for lam in rep.lambdas:
        assert lam.shape == (2, d)
        assert torch.equal(lam[:, : d // 2], lam[:, d // 2 :])
        assert (lam >= 1e-4).all() and (lam <= 1e4).all()
    new = rep.apply(copy.deepcopy(model))
    assert not torch.equal(
        new.model.layers[0].self_attn.k_proj.weight, model.model.layers[0].self_attn.k_proj.weight
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


def test_pi_position_ids():
    assert torch.equal(pi_position_ids(6, 24)[0], torch.arange(6) * 4)
    assert torch.equal(pi_position_ids(6, None)[0], torch.arange(6))
    assert pi_position_ids(2048, 8192, batch=3).shape == (3, 2048)


def test_unsupported_architecture_is_one_clear_error():
    from iclr26_core.models import tiny_model

    with pytest.raises(UserError, match="supports llama, qwen2, mistral"):
        calibrate_reparameterization(tiny_model("gpt2"), [torch.zeros(1, 4, dtype=torch.long)])
