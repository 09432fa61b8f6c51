"""Hyper-parameters of Group Bias Adaptation (GBA), with the paper's defaults.

Paper: Chen, Sheen, Xiong, Wang, Yang, "Taming Polysemanticity in LLMs: Theory-Grounded Feature Recovery
via Sparse Autoencoders", ICLR 2026 (arXiv 2506.14002, https://openreview.net/forum?id=VtWkPIbAQ8).
Fields marked *inferred* are not stated in the public material; the package README lists these readings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .errors import GBAError

ACTIVATIONS = ("relu", "jumprelu")
LOSSES = ("mse", "normalized")
SPACINGS = ("geometric", "linear")
METHODS = ("gba", "ba", "topk", "l1")
PRE_BIASES = ("mean", "zero")


@dataclass
class GBAConfig:
    """Group Bias Adaptation settings (paper §5 "Group Bias Adaptation" and its Algorithm 1).

    n_groups:     K, the number of neuron groups (paper: K = 10).
    htf, ltf:     highest / lowest target activation frequency; group k gets
                  p_k = htf · (ltf/htf)^((k-1)/(K-1)) (paper: HTF 0.5, LTF 1e-3; also 1e-4).
    spacing:      "geometric" (paper) or "linear" (our option, asked for by reviewers).
    gamma_minus:  γ₋, step that lowers the bias of an over-firing neuron (paper: 0.01).
    gamma_plus:   γ₊, step that raises the bias of a dead neuron (paper: 0.01).
    every:        T, optimiser steps between bias updates (paper: 50; our scale=cpu uses 10).
    eps:          a neuron firing less often than this in the window is dead (*inferred*: 1e-6).
    """

    n_groups: int = 10
    htf: float = 0.5
    ltf: float = 1e-3
    spacing: str = "geometric"
    gamma_minus: float = 0.01
    gamma_plus: float = 0.01
    every: int = 50
    eps: float = 1e-6

    def __post_init__(self) -> None:
        validate_adaptation(
            self.n_groups, self.htf, self.ltf, self.every, self.spacing, self.gamma_minus, self.gamma_plus
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate_adaptation(
    n_groups: int,
    htf: float,
    ltf: float,
    every: int = 1,
    spacing: str = "geometric",
    gamma_minus: float = 0.01,
    gamma_plus: float = 0.01,
) -> None:
    """Raise `GBAError` (one line) for an impossible GBA setting."""
    if int(n_groups) < 1:
        raise GBAError(f"n_groups must be >= 1, got {n_groups}")
    for name, v in (("htf", htf), ("ltf", ltf)):
        if not 0.0 < float(v) <= 1.0:
            raise GBAError(f"{name} must be in (0, 1], got {v}")
    if int(n_groups) > 1 and float(htf) <= float(ltf):
        raise GBAError(f"htf must be greater than ltf (got htf={htf}, ltf={ltf})")
    if int(every) < 1:
        raise GBAError(f"every (T, steps between bias updates) must be >= 1, got {every}")
    if spacing not in SPACINGS:
        raise GBAError(f"unknown TAF spacing {spacing!r}; choose one of {', '.join(SPACINGS)}")
    if gamma_minus < 0 or gamma_plus < 0:
        raise GBAError(f"gamma_minus and gamma_plus must be >= 0, got {gamma_minus}, {gamma_plus}")


@dataclass
class TrainConfig:
    """The SAE optimisation (paper §5 and App. experiments).

    lr:             Adam learning rate (*inferred*: 1e-3 synthetic, 1e-4 LLM; the toy claims use 3e-3).
    batch_size:     rows per step (paper: 512).
    unit_norm:      project rows of W to unit norm after each step (theory's spherical constraint;
                    *inferred* for the practical variant).
    learn_pre_bias: let Adam move b_pre (off: a learnable b_pre defeats bias adaptation, see README).
    loss:           "mse" = mean ½‖x̂−x‖²; "normalized" divides by ‖x‖² (for LLM activations).
    activation:     "relu" (theory) or "jumprelu" (*inferred* reading of the paper's LLM runs).
    bias_init:      "zero" (default) or "quantile" (our addition: each neuron starts at its TAF).
    pre_bias:       "mean" (default: b_pre = data mean, *inferred*; what LLM activations need) or "zero"
                    (no centring: the statistical model x = Σ h_i v_i has no offset to remove).
    """

    lr: float = 1e-3
    batch_size: int = 512
    unit_norm: bool = True
    learn_pre_bias: bool = False
    loss: str = "mse"
    activation: str = "relu"
    bias_init: str = "zero"
    pre_bias: str = "mean"
