"""The dimensionless temperature τ/σ: σ of OLMoE-1B-7B's config against its closed form, the scaling rule,
and the KL·τ² variant of the loss."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26_safemoe import logit_spread, miniature_tau, olmoe_config_sigma, routing_alignment_loss


def test_logit_spread_is_the_mean_population_std_across_experts():
    z = torch.randn(5, 3, 8, generator=torch.Generator().manual_seed(0)) * 2
    assert logit_spread(z) == pytest.approx(float(np.std(z.numpy(), axis=-1).mean()), rel=1e-6)


def test_olmoe_config_sigma_matches_the_closed_form():
    """A router N(0, 0.02²) reading a unit-RMS hidden state of size 2048 gives logits of std 0.02·√2048 per
    expert; the population std across 64 experts is that times √(63/64) on average (to within 1-2 %)."""
    from transformers import OlmoeConfig

    cfg = OlmoeConfig()
    closed = cfg.initializer_range * math.sqrt(cfg.hidden_size) * math.sqrt(1 - 1 / cfg.num_experts)
    assert olmoe_config_sigma(n=256) == pytest.approx(closed, rel=0.03)


def test_miniature_tau_keeps_tau_over_sigma():
    tau = miniature_tau(0.1, sigma_mini=4.5, sigma_ref=0.9)
    assert tau == pytest.approx(0.5)
    assert tau / 4.5 == pytest.approx(0.1 / 0.9)


def test_tau2_scaling_is_tau_squared_times_the_kl():
    g = torch.Generator().manual_seed(1)
    cur, ref = torch.randn(4, 2, 8, generator=g), torch.randn(4, 2, 8, generator=g)
    for tau in (0.1, 0.5, 2.0):
        plain = routing_alignment_loss(cur, ref, tau)
        assert float(routing_alignment_loss(cur, ref, tau, tau2_scaling=True)) == pytest.approx(
            tau**2 * float(plain), rel=1e-6
        )
