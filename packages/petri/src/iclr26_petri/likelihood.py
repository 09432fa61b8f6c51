"""The negative-binomial likelihood of the expression decoder (scVI parameterisation)."""

from __future__ import annotations

import torch


def nb_nll(x: torch.Tensor, mu: torch.Tensor, theta: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Element-wise negative log-likelihood of counts ``x`` under NB(mean ``mu``, inverse dispersion ``theta``):

    -[lgamma(x+θ) - lgamma(θ) - lgamma(x+1) + θ·log(θ/(θ+μ)) + x·log(μ/(θ+μ))]

    (``scipy.stats.nbinom(n=θ, p=θ/(θ+μ))``). Shapes broadcast; returns the same shape as ``x``.
    """
    log_theta_mu = torch.log(theta + mu + eps)
    ll = (
        torch.lgamma(x + theta)
        - torch.lgamma(theta)
        - torch.lgamma(x + 1.0)
        + theta * (torch.log(theta + eps) - log_theta_mu)
        + x * (torch.log(mu + eps) - log_theta_mu)
    )
    return -ll


def check_counts(counts: torch.Tensor) -> None:
    """`UserError` unless ``counts`` are non-negative integers (needed by ``likelihood="nb"``)."""
    from iclr26_core.errors import UserError

    if not torch.isfinite(counts).all():
        raise UserError("expression counts contain NaN or infinite values")
    if (counts < 0).any():
        raise UserError("expression counts are negative; likelihood='nb' needs raw integer counts")
    if (counts != torch.round(counts)).any():
        raise UserError(
            "expression counts are not integers; likelihood='nb' needs raw counts (or use likelihood=mse)"
        )
