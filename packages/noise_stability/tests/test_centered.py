"""The centred stability metric on outputs whose values are computed by hand, and noise over the operands only."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_noise_stability import (
    NoiseStabilityRegularizer,
    correlated_tokens,
    modular_addition,
    noise_stability,
    noise_stability_stats,
    resample_one_token,
)
from iclr26_noise_stability.errors import NoiseStabilityError


class Flat(torch.nn.Module):
    """Logits 0 everywhere: M(x) = uniform over C classes whatever x is."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.classes = classes

    def forward(self, ids):
        return torch.zeros(ids.shape[0], self.classes)


class OneHot(torch.nn.Module):
    """M(x) = one-hot of token x_0 (logits 60·e_{x_0}: softmax within e^-60 of exact)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, ids):
        return 60.0 * torch.nn.functional.one_hot(ids[:, 0], self.vocab).double()


def test_flat_output_is_one_normalised_but_zero_centred():
    C, U = 7, 5
    x = torch.randint(0, U, (300, 3), generator=torch.Generator().manual_seed(0))
    s = noise_stability_stats(Flat(C), x, 0.25, n_draws=3, vocab_size=U)
    # by hand: E<M(X), M(Y)> = E|M|² = |E M|² = C · (1/C)² = 1/C
    assert s["stability"] == pytest.approx(1 / C)
    assert s["norm"] == pytest.approx(1 / C) and s["mean_sq"] == pytest.approx(1 / C)
    assert s["normalized"] == pytest.approx(1.0)
    assert s["centered"] == pytest.approx(0.0, abs=1e-12)
    assert s["centered_normalized"] == 0.0  # no variance to be stable: defined as 0


@pytest.mark.parametrize("noise,rho", [("paper", 0.5), ("exact", 0.3)])
def test_one_hot_output_matches_the_hand_computed_values(noise, rho):
    U, reps = 5, 8000
    x = torch.arange(U).repeat(reps).unsqueeze(1).repeat(1, 2)  # every token equally often: E M = uniform
    q = (1 + rho) / 2 if noise == "paper" else rho
    gen = torch.Generator().manual_seed(1)
    s = noise_stability_stats(OneHot(U), x, rho, n_draws=4, noise=noise, vocab_size=U, generator=gen)
    # by hand: <M(X), M(Y)> = 1[x_0 = y_0], P = q + (1−q)/U; |M|² = 1; |E M|² = U·(1/U)² = 1/U
    same = q + (1 - q) / U
    tol = 3 * math.sqrt(same * (1 - same) / (U * reps * 4)) + 1e-9
    assert s["norm"] == pytest.approx(1.0) and s["mean_sq"] == pytest.approx(1 / U)
    assert s["stability"] == pytest.approx(same, abs=tol)
    assert s["normalized"] == pytest.approx(same, abs=tol)
    assert s["centered"] == pytest.approx(q * (1 - 1 / U), abs=tol)
    assert s["centered_normalized"] == pytest.approx(q, abs=tol / (1 - 1 / U))  # the noise eigenvalue
    # the single-number API returns the same four quantities
    for normalized, centered, key in [
        (True, False, "normalized"),
        (False, False, "stability"),
        (False, True, "centered"),
        (True, True, "centered_normalized"),
    ]:
        gen = torch.Generator().manual_seed(1)
        one = noise_stability(
            OneHot(U), x, rho, 4, normalized, noise, vocab_size=U, generator=gen, centered=centered
        )
        assert one == pytest.approx(s[key])


def test_modular_addition_noise_resamples_operands_only():
    p, rho = 11, 0.0  # q = 1/2 under paper noise
    task = modular_addition(p, 0.5)
    assert task.support == p and task.vocab_size == p + 1
    x = task.x_train.repeat(200, 1)
    reg = NoiseStabilityRegularizer(0.75, rho, positions=task.positions, vocab_size=task.vocab_size)
    reg.support = task.support
    y = reg.noised(None, x, torch.Generator().manual_seed(0))
    assert int(y[:, :2].max()) < p  # "=" (token p) never appears at a or b
    assert torch.equal(y[:, 2], x[:, 2])  # the "=" position never changes
    keep, n = float((y[:, :2] == x[:, :2]).double().mean()), y[:, :2].numel()
    expect = 0.5 + 0.5 / p
    assert abs(keep - expect) < 3 * math.sqrt(expect * (1 - expect) / n)
    # without the support the old behaviour: "=" is drawn at a/b about 1/(p+1) of the resamples
    z = correlated_tokens(x, rho, p + 1, positions=[0, 1], generator=torch.Generator().manual_seed(0))
    assert int((z[:, :2] == p).sum()) > 0


def test_support_as_ids_and_for_one_token_resampling():
    x = torch.zeros(4000, 3, dtype=torch.long)
    y = correlated_tokens(x, 0.0, 10, "exact", support=[3, 7], generator=torch.Generator().manual_seed(0))
    assert set(y.unique().tolist()) == {3, 7}
    z = resample_one_token(x, 10, positions=[1], support=2, generator=torch.Generator().manual_seed(0))
    assert set(z[:, 1].unique().tolist()) == {0, 1} and int(z[:, [0, 2]].abs().sum()) == 0


@pytest.mark.parametrize("support", [0, 11, [], [2, 10], [-1]])
def test_bad_support_is_one_clear_error(support):
    with pytest.raises(NoiseStabilityError, match="support"):
        correlated_tokens(torch.zeros(2, 3, dtype=torch.long), 0.5, 10, support=support)
