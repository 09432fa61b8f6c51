"""Correlated token noise: keep-rate, untouched positions, the eigenvalue on discrete characters, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26_noise_stability import correlated_tokens, noise_eigenvalue, resample_one_token
from iclr26_noise_stability.errors import NoiseStabilityError


@pytest.mark.parametrize("noise,rho", [("paper", 0.25), ("paper", 0.8), ("exact", 0.25), ("exact", 0.8)])
def test_keep_rate_within_three_sigma(noise, rho):
    U, n = 7, 200_000
    x = torch.randint(0, U, (n // 4, 4), generator=torch.Generator().manual_seed(0))
    y = correlated_tokens(x, rho, U, noise, generator=torch.Generator().manual_seed(1))
    q = (1 + rho) / 2 if noise == "paper" else rho
    p = q + (1 - q) / U
    rate = float((x == y).double().mean())
    assert abs(rate - p) < 3 * math.sqrt(p * (1 - p) / n)
    assert y.dtype == x.dtype and y.shape == x.shape


def test_positions_outside_are_never_changed():
    x = torch.randint(0, 50, (500, 5), generator=torch.Generator().manual_seed(0))
    y = correlated_tokens(x, 0.0, 50, positions=[0, -2], generator=torch.Generator().manual_seed(2))
    assert torch.equal(x[:, [1, 2, 4]], y[:, [1, 2, 4]])
    assert (x[:, 0] != y[:, 0]).any() and (x[:, 3] != y[:, 3]).any()
    z = resample_one_token(x, 50, positions=[1], generator=torch.Generator().manual_seed(3))
    assert torch.equal(x[:, [0, 2, 3, 4]], z[:, [0, 2, 3, 4]])


@pytest.mark.parametrize("noise", ["paper", "exact"])
@pytest.mark.parametrize("support", [[0], [0, 2]])
def test_discrete_character_stability_is_q_to_the_size(noise, support):
    U, rho = 6, 0.4
    chi = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])  # balanced ±1 map on the vocabulary

    def f(ids):
        return chi[ids[:, support]].prod(-1)

    x = torch.randint(0, U, (400_000, 4), generator=torch.Generator().manual_seed(5))
    y = correlated_tokens(x, rho, U, noise, generator=torch.Generator().manual_seed(6))
    stab = float((f(x) * f(y)).mean())
    q = (1 + rho) / 2 if noise == "paper" else rho
    assert abs(stab - q ** len(support)) < 0.01
    assert noise_eigenvalue(rho, noise) == pytest.approx(q)


def test_resample_one_token_changes_at_most_one_position():
    x = torch.randint(0, 1000, (300, 6), generator=torch.Generator().manual_seed(0))
    z = resample_one_token(x, 1000, generator=torch.Generator().manual_seed(1))
    changed = (x != z).sum(-1)
    assert int(changed.max()) == 1 and float((changed == 1).double().mean()) > 0.99


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(rho=1.5), r"\[0, 1\]"),
        (dict(rho=-0.1), r"\[0, 1\]"),
        (dict(vocab_size=5), "smaller than the largest id"),
        (dict(positions=[3]), "out of range"),
        (dict(noise="gauss"), "noise must be one of"),
    ],
)
def test_bad_arguments_are_one_clear_error(kwargs, match):
    x = torch.tensor([[1, 2, 9]])
    args = dict(rho=0.5, vocab_size=10) | kwargs
    with pytest.raises(NoiseStabilityError, match=match):
        correlated_tokens(x, **args)


def test_float_input_ids_are_refused():
    with pytest.raises(NoiseStabilityError, match="integer tensor"):
        correlated_tokens(torch.tensor([[1.0, 2.0]]), 0.5, 10)
