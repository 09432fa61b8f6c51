"""Noise stability of one self-attention layer with Gaussian token embeddings (Thm 5.2/5.3).

X, Z ∈ R^{n×d} with i.i.d. N(0, 1) entries, Y = ρX + √(1−ρ²)Z, W = W_Q W_Kᵀ [d, d], and

    Attn(X) = softmax(X W Xᵀ / √d) X W_V            (row-wise softmax; output [n, d_v])

* identity W: the diagonal score ‖x_i‖²/√d ≈ √d dominates, attention → I_n and the normalised stability stays
  ≈ ρ (linear in ρ);
* unstructured W with N(0, 1) entries: scores have spread ≈ √d, attention ≈ hard attention to one key, and the
  stability of an output coordinate is ≈ ρ·s(ρ)·‖(W_V)_{:,j}‖² with s(ρ) = P(X and Y attend to the same key).
"""

from __future__ import annotations

import math

import torch

from .errors import NoiseStabilityError, check_rho


def attention_output(
    x: torch.Tensor, w_qk: torch.Tensor, w_v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax(X W Xᵀ/√d) X W_V, scores) for x [..., n, d]; scores [..., n, n]."""
    d = x.shape[-1]
    scores = x @ w_qk @ x.transpose(-1, -2) / math.sqrt(d)
    return torch.softmax(scores, dim=-1) @ x @ w_v, scores


@torch.no_grad()
def attention_stability(
    w_qk: torch.Tensor,
    w_v: torch.Tensor,
    rho: float,
    n_tokens: int = 16,
    n_samples: int = 4000,
    seed: int = 0,
    batch_size: int = 1000,
) -> dict[str, float]:
    """Monte-Carlo stability of one attention layer on Gaussian inputs.

    Returns ``stability`` = E⟨Attn(X), Attn(Y)⟩ per token row, ``normalized`` = that / E‖Attn(X)‖², and
    ``same_key_prob`` = ŝ(ρ), the fraction of query rows whose argmax key is the same for X and Y.
    """
    rho = check_rho(rho, tokens=False)
    if w_qk.dim() != 2 or w_qk.shape[0] != w_qk.shape[1]:
        raise NoiseStabilityError(f"w_qk must be a square [d, d] matrix, got shape {tuple(w_qk.shape)}")
    d = w_qk.shape[0]
    if w_v.dim() != 2 or w_v.shape[0] != d:
        raise NoiseStabilityError(f"w_v must be [d={d}, d_v], got shape {tuple(w_v.shape)}")
    w_qk, w_v = w_qk.double(), w_v.double()
    gen = torch.Generator().manual_seed(seed)
    inner = norm = same = 0.0
    done = 0
    while done < n_samples:
        b = min(batch_size, n_samples - done)
        x = torch.randn(b, n_tokens, d, generator=gen, dtype=torch.float64)
        z = torch.randn(b, n_tokens, d, generator=gen, dtype=torch.float64)
        y = rho * x + math.sqrt(max(0.0, 1 - rho * rho)) * z
        ox, sx = attention_output(x, w_qk, w_v)
        oy, sy = attention_output(y, w_qk, w_v)
        inner += float((ox * oy).sum(-1).sum())
        norm += float((ox * ox).sum(-1).sum())
        same += float((sx.argmax(-1) == sy.argmax(-1)).double().sum())
        done += b
    rows = n_samples * n_tokens
    return {
        "stability": inner / rows,
        "normalized": inner / norm,
        "same_key_prob": same / rows,
        "rho": rho,
        "n_tokens": n_tokens,
        "dim": d,
        "n_samples": n_samples,
    }


def propagate_interval(
    lo: float,
    hi: float,
    layers: list[str],
    gamma: float = 1.0,
    same_key_prob=None,
) -> list[tuple[float, float]]:
    """Inferred reading (not stated in the public material; not claimed): carry [lo, hi] correlation bounds
    through a stack of layers with each component's monotone map.

    ``"relu"``: ρ ↦ `relu_stability`(ρ) (Thm 5.1, increasing on [−1, 1]); ``"attention"``: ρ ↦ ρ·s(ρ)·γ²
    with ``same_key_prob`` a callable s(ρ) (default: s ≡ 1, the identity-W case). Returns the interval
    after every layer, the input first.
    """
    from .stability import relu_stability

    if lo > hi:
        raise NoiseStabilityError(f"need lo <= hi, got [{lo}, {hi}]")
    s = same_key_prob or (lambda r: 1.0)
    out = [(float(lo), float(hi))]
    for layer in layers:
        a, b = out[-1]
        if layer == "relu":
            out.append((relu_stability(a), relu_stability(b)))
        elif layer == "attention":
            ends = [r * s(r) * gamma * gamma for r in (a, b)]
            out.append((min(ends), max(ends)))
        else:
            raise NoiseStabilityError(f"unknown layer {layer!r}; use 'relu' or 'attention'")
    return out
