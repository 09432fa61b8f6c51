"""Noise stability: Monte Carlo for models and functions, the ReLU closed form (Thm 5.1) and its fixed point.

Gaussian noise stability of f: R^d → R^k with X, Z ~ N(0, I_d), Y = ρX + √(1−ρ²)Z:

    Stab_ρ(f) = E⟨f(X), f(Y)⟩ = Σ_α ρ^{|α|} f̃(α)²           (Hermite expansion)

reported normalised as Stab_ρ(f) / E‖f(X)‖². For a model, f is the softmax output and the noise is
`correlated_tokens` (eigenvalue q; see `iclr26_noise_stability.noise`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .errors import check_noise, check_rho
from .noise import check_input_ids, correlated_tokens
from .regularizer import model_logits, select


def relu_stability(rho: float | torch.Tensor) -> float | torch.Tensor:
    """E[ReLU(X)·ReLU(Y)] for standard ρ-correlated Gaussians: (√(1−ρ²) + ρ(π − arccos ρ)) / (2π).

    Thm 5.1; ≈ 1/(2π) + ρ/4 + ρ²/(4π) near 0; equals 1/2 = E[ReLU(X)²] at ρ = 1.
    """
    if isinstance(rho, torch.Tensor):
        r = rho.clamp(-1.0, 1.0)
        return (torch.sqrt(1 - r * r) + r * (math.pi - torch.arccos(r))) / (2 * math.pi)
    r = check_rho(rho, tokens=False)
    return (math.sqrt(max(0.0, 1 - r * r)) + r * (math.pi - math.acos(r))) / (2 * math.pi)


def relu_fixed_point(
    taylor: bool = False, start: float = 0.0, tol: float = 1e-12, max_iter: int = 10_000
) -> float:
    """The fixed point s* = relu_stability(s*) that deep ReLU stability converges to ("weak dampening").

    ``taylor=True`` gives the paper's first-order value: s = 1/(2π) + s/4, i.e. 2/(3π) ≈ 0.2122. The exact
    map is a contraction on [−1, 1] (slope ≤ 1/2), so plain iteration converges (to 0.21723).
    """
    if taylor:
        return 2.0 / (3.0 * math.pi)
    s = float(start)
    for _ in range(max_iter):
        nxt = relu_stability(s)
        if abs(nxt - s) < tol:
            return nxt
        s = nxt
    return s


def iterate_relu_map(start: float, depth: int) -> list[float]:
    """[ρ₀, f(ρ₀), f(f(ρ₀)), ...] with ``depth`` applications of `relu_stability`."""
    out = [float(start)]
    for _ in range(depth):
        out.append(relu_stability(out[-1]))
    return out


def gaussian_noise_stability(
    f: Callable[[torch.Tensor], torch.Tensor],
    dim: int,
    rho: float,
    n_samples: int = 100_000,
    seed: int = 0,
    batch_size: int = 1_000_000,
    normalized: bool = False,
) -> float:
    """Monte-Carlo E⟨f(X), f(Y)⟩ with X, Z ~ N(0, I_dim), Y = ρX + √(1−ρ²)Z; f maps [n, dim] → [n] or [n, k]."""
    rho = check_rho(rho, tokens=False)
    gen = torch.Generator().manual_seed(seed)
    total, norm, done = 0.0, 0.0, 0
    while done < n_samples:
        n = min(batch_size, n_samples - done)
        x = torch.randn(n, dim, generator=gen, dtype=torch.float64)
        z = torch.randn(n, dim, generator=gen, dtype=torch.float64)
        y = rho * x + math.sqrt(1 - rho * rho) * z
        fx, fy = f(x), f(y)
        fx, fy = fx.reshape(n, -1), fy.reshape(n, -1)
        total += float((fx * fy).sum())
        norm += float((fx * fx).sum())
        done += n
    return total / norm if normalized else total / n_samples


@torch.no_grad()
def noise_stability_stats(
    model: Any,
    input_ids: torch.Tensor,
    rho: float,
    n_draws: int = 8,
    noise: str = "paper",
    positions: Sequence[int] | None = None,
    readout: int | None = None,
    vocab_size: int | None = None,
    generator: torch.Generator | None = None,
    classes: int | None = None,
    support: int | Sequence[int] | None = None,
    **forward_kwargs: Any,
) -> dict[str, float]:
    """Monte-Carlo moments of the output distribution M on ``input_ids`` ([B, T] integer) and noised copies.

    Returns ``stability`` = E⟨M(X), M(Y)⟩, ``norm`` = E‖M(X)‖², ``mean_sq`` = ‖E M(X)‖² (the mean over the
    rows, and positions for sequence outputs), and the derived

    * ``normalized`` = stability / norm — 1 for a flat output (not centred);
    * ``centered`` = stability − mean_sq — the stability of the non-constant part: 0 for any output that
      does not depend on the input (a flat one included), q·(1 − 1/U) for a one-hot copy of one uniform
      token over U ids under keep-probability q;
    * ``centered_normalized`` = centered / (norm − mean_sq) ∈ [−1, 1] — the correlation of M(X) and M(Y)
      (q for that one-hot copy); 0 when the output is constant (no variance to be stable).

    E over the rows of ``input_ids`` and ``n_draws`` noised copies each. Sequence outputs are averaged over
    positions unless ``readout`` picks one; ``classes`` restricts M to the first logits (a task's labels).
    """
    rho = check_rho(rho, tokens=True)
    check_noise(noise)
    vocab = int(vocab_size or model.config.vocab_size)
    check_input_ids(input_ids, vocab)
    seq = input_ids.dim()

    def probs(ids: torch.Tensor) -> torch.Tensor:
        logits = select(model_logits(model, ids, **forward_kwargs), readout, seq, classes)
        return torch.softmax(logits.float(), -1).double()

    was = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        px = probs(input_ids)
        flat = px.reshape(-1, px.shape[-1])
        norm = float((flat * flat).sum(-1).mean())
        mean = flat.mean(0)
        mean_sq = float((mean * mean).sum())
        total = 0.0
        for _ in range(n_draws):
            y = correlated_tokens(input_ids, rho, vocab, noise, positions, generator, support)
            total += float((px * probs(y)).sum(-1).mean())
    finally:
        if was and hasattr(model, "train"):
            model.train()
    stab = total / n_draws
    var = norm - mean_sq
    return {
        "stability": stab,
        "norm": norm,
        "mean_sq": mean_sq,
        "normalized": stab / norm,
        "centered": stab - mean_sq,
        "centered_normalized": (stab - mean_sq) / var if var > 1e-12 else 0.0,
    }


def noise_stability(
    model: Any,
    input_ids: torch.Tensor,
    rho: float,
    n_draws: int = 8,
    normalized: bool = True,
    noise: str = "paper",
    centered: bool = False,
    **kwargs: Any,
) -> float:
    """Monte-Carlo Stab_ρ of the model's output distribution on ``input_ids`` ([B, T] integer).

    E⟨M(X), M(Y)⟩ over the rows of ``input_ids`` and ``n_draws`` noised copies each; ``normalized`` divides
    by E‖M(X)‖² (so 1 at ρ = 1 under ``paper`` noise, and 1 for a flat output); ``centered`` subtracts
    ‖E M(X)‖² first (and then normalises by the variance E‖M(X)‖² − ‖E M(X)‖²). ``kwargs`` (``positions``,
    ``readout``, ``vocab_size``, ``generator``, ``classes``, ``support``, forward arguments) go to
    `noise_stability_stats`.
    """
    stats = noise_stability_stats(model, input_ids, rho, n_draws, noise, **kwargs)
    key = {
        (False, False): "stability",
        (True, False): "normalized",
        (False, True): "centered",
        (True, True): "centered_normalized",
    }[(bool(normalized), bool(centered))]
    return stats[key]
