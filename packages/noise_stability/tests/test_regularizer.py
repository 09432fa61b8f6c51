"""The regulariser on a tiny real GPT-2 and a plain module; Monte-Carlo noise stability of a model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr26_core.testing import odd_model
from iclr26_noise_stability import NoiseStabilityRegularizer, modular_addition, noise_stability
from iclr26_noise_stability.errors import NoiseStabilityError
from iclr26_noise_stability.training import task_loss


@pytest.fixture
def gpt2():
    torch.manual_seed(0)
    return odd_model("gpt2", seed=0).eval()  # vocab 99, n_embd 36, 2 layers, 3 heads; no dropout in eval


def ids(n=6, t=10, vocab=99, seed=0):
    return torch.randint(0, vocab, (n, t), generator=torch.Generator().manual_seed(seed))


def _reg(S, gen_seed, model, x, **kw):
    reg = NoiseStabilityRegularizer(gamma=0.5, rho=0.3, S=S, **kw)
    return reg(model, x, generator=torch.Generator().manual_seed(gen_seed))


def test_sign_and_range(gpt2):
    x = ids()
    enc, dis = _reg(1, 7, gpt2, x).detach(), _reg(0, 7, gpt2, x).detach()
    assert float(enc) < 0 < float(dis)
    assert float(enc) == pytest.approx(-float(dis))  # same draw, opposite sign
    assert -0.5 <= float(enc) <= 0 and 0 <= float(dis) <= 0.5
    # the value is γ·(−1)^S·mean ⟨softmax(M(X)), softmax(M(Y))⟩, recomputed by hand with the same noise
    reg = NoiseStabilityRegularizer(gamma=0.5, rho=0.3, S=1)
    y = reg.noised(gpt2, x, torch.Generator().manual_seed(7))
    with torch.no_grad():
        p = torch.softmax(gpt2(input_ids=x).logits, -1)
        q = torch.softmax(gpt2(input_ids=y).logits, -1)
    assert float(enc) == pytest.approx(-0.5 * float((p * q).sum(-1).mean()), rel=1e-5)


def test_gradients_flow_through_both_passes(gpt2):
    x = ids()
    reg = NoiseStabilityRegularizer(gamma=1.0, rho=0.3)
    # noisy pass only: clean logits detached
    clean = gpt2(input_ids=x).logits.detach()
    reg(gpt2, x, clean, generator=torch.Generator().manual_seed(1)).backward()
    g_noisy = gpt2.transformer.wte.weight.grad.abs().sum()
    gpt2.zero_grad()
    # clean pass only: noisy side detached
    reg_d = NoiseStabilityRegularizer(gamma=1.0, rho=0.3, detach_noisy=True)
    reg_d(gpt2, x, gpt2(input_ids=x).logits, generator=torch.Generator().manual_seed(1)).backward()
    g_clean = gpt2.transformer.wte.weight.grad.abs().sum()
    assert float(g_noisy) > 0 and float(g_clean) > 0


def test_gamma_zero_equals_cross_entropy():
    task = modular_addition(7, 0.5)
    from iclr26_noise_stability import task_model

    model = task_model(task, n_embd=16, n_head=2, n_inner=32, seed=0)
    x, y = task.x_train, task.y_train
    plain = F.cross_entropy(model(input_ids=x).logits[:, -1, :7], y).detach()
    reg0 = task_loss(task, NoiseStabilityRegularizer(gamma=0.0, positions=task.positions))(model, (x, y))
    assert float(reg0.detach()) == pytest.approx(float(plain), abs=1e-6)
    reg1 = task_loss(task, NoiseStabilityRegularizer(gamma=0.75, positions=task.positions))(model, (x, y))
    assert float(reg1.detach()) < float(plain)  # S = 1 adds −γ⟨·,·⟩ < 0


def test_one_regularised_step_is_finite(gpt2):
    x = ids()
    opt = torch.optim.AdamW(gpt2.parameters(), lr=1e-3)
    reg = NoiseStabilityRegularizer()
    out = gpt2(input_ids=x, labels=x)
    loss = out.loss + reg(gpt2, x, out.logits)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p).all() for p in gpt2.parameters())


def test_plain_module_and_readout():
    model = torch.nn.Sequential(torch.nn.Embedding(12, 8), torch.nn.Flatten(), torch.nn.Linear(24, 5))
    x = ids(4, 3, 12)
    with pytest.raises(NoiseStabilityError, match="vocab_size"):
        NoiseStabilityRegularizer()(model, x)
    val = NoiseStabilityRegularizer(gamma=1.0, vocab_size=12, positions=[0, 1])(model, x)
    assert -1 <= float(val.detach()) <= 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(gamma=-0.1), "gamma must be >= 0"),
        (dict(S=2), "S must be 0"),
        (dict(rho=1.2), r"\[0, 1\]"),
        (dict(noise="bits"), "noise must be one of"),
    ],
)
def test_bad_settings(kwargs, match):
    with pytest.raises(NoiseStabilityError, match=match):
        NoiseStabilityRegularizer(**kwargs)


def test_bad_input_ids(gpt2):
    reg = NoiseStabilityRegularizer()
    with pytest.raises(NoiseStabilityError, match="integer tensor"):
        reg(gpt2, torch.rand(2, 5))
    with pytest.raises(NoiseStabilityError, match="smaller than the largest id"):
        NoiseStabilityRegularizer(vocab_size=50)(gpt2, torch.tensor([[3, 70]]))
    with pytest.raises(NoiseStabilityError, match="out of range"):
        NoiseStabilityRegularizer(positions=[12])(gpt2, ids())


def test_noise_stability_is_one_without_noise_and_grows_with_rho():
    model = odd_model("gpt2", seed=1, initializer_range=0.5).eval()  # large init: input-dependent outputs
    x = ids(64, 8, seed=3)
    assert noise_stability(model, x, 1.0) == pytest.approx(1.0, abs=1e-6)
    assert noise_stability(model, x, 1.0, noise="exact") == pytest.approx(1.0, abs=1e-6)
    gen = torch.Generator().manual_seed(0)
    s = [noise_stability(model, x, r, n_draws=16, noise="exact", generator=gen) for r in (0.0, 0.5, 0.9)]
    assert s[0] < s[1] < s[2] < 1.0
    assert s[0] >= 0.0


def test_classes_restricts_the_distribution_to_the_label_space(gpt2):
    x = ids()
    reg = NoiseStabilityRegularizer(gamma=1.0, rho=0.3, readout=-1, classes=10)
    val = reg(gpt2, x, generator=torch.Generator().manual_seed(4)).detach()
    y = reg.noised(gpt2, x, torch.Generator().manual_seed(4))
    with torch.no_grad():
        p = torch.softmax(gpt2(input_ids=x).logits[:, -1, :10], -1)
        q = torch.softmax(gpt2(input_ids=y).logits[:, -1, :10], -1)
    assert float(val) == pytest.approx(-float((p * q).sum(-1).mean()), rel=1e-5)
    s_all = noise_stability(gpt2, x, 0.3, readout=-1, generator=torch.Generator().manual_seed(0))
    s_ten = noise_stability(gpt2, x, 0.3, readout=-1, classes=10, generator=torch.Generator().manual_seed(0))
    assert s_all != pytest.approx(s_ten)
