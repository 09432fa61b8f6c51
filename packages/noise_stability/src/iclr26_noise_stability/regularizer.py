"""The noise-stability regulariser (Def. 6.1) as a drop-in loss term.

    R_{M,S,ρ}(X) = (−1)^S · Σ_c M(X)_c · M(Y)_c,   Y = correlated_tokens(X),   ℓ_reg = ℓ(M, X) + γ·R

M(·) is the softmax output. S = 1 (the paper's evaluated setting) minimises −⟨M(X), M(Y)⟩, i.e. rewards
stability; S = 0 penalises it. Gradients flow through both forward passes unless ``detach_noisy``
(inferred: the public text does not say). For sequence outputs the inner product is summed over the
vocabulary and averaged over positions and batch (inferred); ``readout`` picks one output position instead
(e.g. −1 for the "=" token of modular addition) and ``classes`` restricts M(·) to the label space (the
first ``classes`` logits: for modular addition the p residues, not the "=" token, which the cross-entropy never
sees — otherwise stability is trivially maximised by putting all mass on "="), and ``support`` the ids a noised
token may become (for modular addition the p residues: a and b are resampled as operands, never as "=").
A fresh noise draw is taken on every call.

``mode="avgsens"`` is a reviewer-requested control: Y resamples one random token (average sensitivity)
instead of applying ρ-correlated noise everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .errors import NoiseStabilityError, check_gamma, check_noise, check_rho, check_sign
from .noise import check_input_ids, correlated_tokens, position_mask, resample_one_token


def model_logits(model: Any, input_ids: torch.Tensor, **forward_kwargs: Any) -> torch.Tensor:
    """Logits of a `transformers` model (``.logits``) or a plain module returning a tensor."""
    try:
        from transformers import PreTrainedModel
    except ImportError:  # pragma: no cover - transformers is a dependency
        PreTrainedModel = ()
    if isinstance(model, PreTrainedModel):
        out = model(input_ids=input_ids, **forward_kwargs)
    else:
        out = model(input_ids, **forward_kwargs)
    logits = getattr(out, "logits", out)
    if isinstance(logits, tuple | list):
        logits = logits[0]
    if not isinstance(logits, torch.Tensor):
        raise NoiseStabilityError(f"the model returned {type(out).__name__}, not logits")
    return logits


def select(
    logits: torch.Tensor, readout: int | None, seq_dims: int, classes: int | None = None
) -> torch.Tensor:
    """Logits at output position ``readout`` when the output has a sequence axis ([B, T, C] → [B, C]),
    restricted to the first ``classes`` entries when given (the label space of a task)."""
    if readout is not None and logits.dim() > seq_dims:
        logits = logits[..., readout, :]
    return logits if classes is None else logits[..., :classes]


def inner_product(logits_x: torch.Tensor, logits_y: torch.Tensor) -> torch.Tensor:
    """Mean over batch (and positions) of ⟨softmax(x), softmax(y)⟩ summed over the last (class) axis."""
    p = torch.softmax(logits_x.float(), dim=-1)
    q = torch.softmax(logits_y.float(), dim=-1)
    return (p * q).sum(-1).mean()


class NoiseStabilityRegularizer:
    """γ·(−1)^S·⟨M(X), M(Y)⟩ for a fresh token-noised copy Y of X; call ``reg(model, input_ids, logits)``.

    ``gamma``/``rho`` default to the paper's modular-addition values (0.75, 0.25); noisy sparse parity used
    (0.05, 0.05). ``vocab_size`` defaults to ``model.config.vocab_size``.
    """

    def __init__(
        self,
        gamma: float = 0.75,
        rho: float = 0.25,
        S: int = 1,
        noise: str = "paper",
        positions: Sequence[int] | None = None,
        vocab_size: int | None = None,
        readout: int | None = None,
        detach_noisy: bool = False,
        mode: str = "stability",
        classes: int | None = None,
        support: int | Sequence[int] | None = None,
    ) -> None:
        self.gamma = check_gamma(gamma)
        self.rho = check_rho(rho, tokens=True)
        self.S = check_sign(S)
        self.noise = check_noise(noise)
        self.positions = None if positions is None else [int(p) for p in positions]
        self.vocab_size = vocab_size
        self.readout = readout
        self.classes = None if classes is None else int(classes)
        self.support = support
        self.detach_noisy = bool(detach_noisy)
        if mode not in ("stability", "avgsens"):
            raise NoiseStabilityError(f"mode must be 'stability' or 'avgsens', got {mode!r}")
        self.mode = mode

    def __repr__(self) -> str:
        return (
            f"NoiseStabilityRegularizer(gamma={self.gamma}, rho={self.rho}, S={self.S}, noise={self.noise!r}, "
            f"positions={self.positions}, support={self.support}, mode={self.mode!r})"
        )

    def _vocab(self, model: Any) -> int:
        if self.vocab_size is not None:
            return int(self.vocab_size)
        config = getattr(model, "config", None)
        if config is not None and getattr(config, "vocab_size", None):
            return int(config.vocab_size)
        raise NoiseStabilityError("vocab_size is needed for a model without config.vocab_size")

    def noised(self, model: Any, input_ids: torch.Tensor, generator: torch.Generator | None = None):
        vocab = self._vocab(model)
        check_input_ids(input_ids, vocab)
        position_mask(input_ids.shape[-1], self.positions)  # checks the positions
        if self.mode == "avgsens":
            return resample_one_token(input_ids, vocab, self.positions, generator, self.support)
        return correlated_tokens(
            input_ids, self.rho, vocab, self.noise, self.positions, generator, self.support
        )

    def __call__(
        self,
        model: Any,
        input_ids: torch.Tensor,
        logits: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        **forward_kwargs: Any,
    ) -> torch.Tensor:
        """γ·R as a scalar tensor; ``logits`` are the clean forward's (recomputed when not given)."""
        noisy = self.noised(model, input_ids, generator)
        if logits is None:
            logits = model_logits(model, input_ids, **forward_kwargs)
        noisy_logits = model_logits(model, noisy, **forward_kwargs)
        seq_dims = input_ids.dim()  # logits with a position axis have input_ids.dim() + 1 dims
        lx = select(logits, self.readout, seq_dims, self.classes)
        ly = select(noisy_logits, self.readout, seq_dims, self.classes)
        if lx.shape != ly.shape:
            raise NoiseStabilityError(
                f"logits of shape {tuple(logits.shape)} do not match the model's output "
                f"{tuple(noisy_logits.shape)}; pass the clean forward's logits (or readout=...)"
            )
        if self.detach_noisy:
            ly = ly.detach()
        sign = -1.0 if self.S == 1 else 1.0
        return self.gamma * sign * inner_product(lx, ly)
