"""Grokking accelerators from peer libraries, run on the same task, split, initialisation and cap.

* ``grokfast`` — `pytorch_optimizer.gradfilter_ema` (pytorch-optimizer): the Grokfast-EMA filter of Lee et al.
  2024 (g ← g + λ·EMA_α(g), α 0.98, λ 2) applied to the gradients before the same torch AdamW as the baseline.
* ``grokfast_pytorch`` — `grokfast_pytorch.GrokFastAdamW`: the same filter fused into an AdamW. Two
  adaptations so that it runs the baseline's optimizer: ``normalize_lr=False`` (the library divides lr by
  1 + λ by default; the Grokfast paper does not) and ``weight_decay = lr·wd`` (the library shrinks weights by
  ``weight_decay`` per step, torch AdamW by ``lr·weight_decay``).
* ``reg+grokfast`` — the noise-stability regulariser and the Grokfast filter together.

A missing peer is reported once as "peers not installed: ..." by `missing_peers`.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

PEER_DISTS = {"grokfast": "pytorch-optimizer", "grokfast_pytorch": "grokfast-pytorch"}
_MODULES = {"pytorch-optimizer": "pytorch_optimizer", "grokfast-pytorch": "grokfast_pytorch"}


def installed(dist: str) -> bool:
    return importlib.util.find_spec(_MODULES[dist]) is not None


def missing_peers(arms: list[str]) -> list[str]:
    """Distributions needed by ``arms`` that are not installed."""
    need = {PEER_DISTS[a.replace("reg+", "")] for a in arms if a.replace("reg+", "") in PEER_DISTS}
    return sorted(d for d in need if not installed(d))


class GradFilterAdamW(torch.optim.AdamW):
    """torch AdamW whose ``step`` first applies pytorch-optimizer's ``gradfilter_ema`` to ``model``'s grads."""

    def __init__(self, model: torch.nn.Module, alpha: float = 0.98, lamb: float = 2.0, **adamw: Any) -> None:
        from pytorch_optimizer.optimizer.grokfast import gradfilter_ema

        super().__init__([p for p in model.parameters() if p.requires_grad], **adamw)
        self._filter = gradfilter_ema
        self._model = model
        self._alpha, self._lamb = alpha, lamb
        self._ema: dict[str, torch.Tensor] | None = None

    def step(self, closure=None):  # type: ignore[override]
        self._ema = self._filter(self._model, grads=self._ema, alpha=self._alpha, lamb=self._lamb)
        return super().step(closure)


def make_optimizer(
    arm: str,
    model: torch.nn.Module,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float],
    alpha: float = 0.98,
    lamb: float = 2.0,
) -> torch.optim.Optimizer | None:
    """The optimizer of a peer arm (``None``: the training loop's own AdamW)."""
    base = arm.replace("reg+", "")
    if base == "grokfast":
        return GradFilterAdamW(model, alpha, lamb, lr=lr, weight_decay=weight_decay, betas=betas)
    if base == "grokfast_pytorch":
        from grokfast_pytorch import GrokFastAdamW

        return GrokFastAdamW(
            model.parameters(),
            lr=lr,
            betas=betas,
            weight_decay=lr * weight_decay,
            grokfast_alpha=alpha,
            grokfast_lamb=lamb,
            normalize_lr=False,
        )
    return None
