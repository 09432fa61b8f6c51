"""Spectral-tail bounds (Lemma 1) from noise stability and from average sensitivity.

For f of uniformly random token sequences x ∈ [U]^n with Efron–Stein masses W_S (Σ_S W_S = E‖f‖²):

* token noise with eigenvalue λ gives Stab = Σ_S λ^{|S|} W_S, so
  ‖f‖² − Stab = Σ_S (1 − λ^{|S|}) W_S ≥ (1 − λ^{degree}) W_{≥degree}  ⇒  W_{≥degree} ≤ (‖f‖² − Stab)/(1 − λ^{degree});
* Inf_i = ½ E‖f(x) − f(x^{(i)})‖² (token i resampled), AS = Σ_i Inf_i = Σ_S |S| W_S ⇒ W_{≥degree} ≤ AS/degree.

``degree`` = T + 1: both bounds are on the mass at degree ≥ ``degree``. The stability bound is minimised over
the ρ grid; λ = (1+ρ)/2 for ``noise="paper"`` and ρ for ``"exact"`` (dividing by 1 − ρ^degree under ``paper``
noise would be invalid). Masses are reported raw and as fractions of E‖f‖².
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .errors import NoiseStabilityError, check_noise
from .noise import correlated_tokens, noise_eigenvalue
from .regularizer import model_logits, select


def _outputs(model: Any, output: str, readout: int | None) -> Callable[[torch.Tensor], torch.Tensor]:
    if output not in ("probs", "raw"):
        raise NoiseStabilityError(f"output must be 'probs' or 'raw', got {output!r}")

    def f(ids: torch.Tensor) -> torch.Tensor:
        if output == "raw" and not isinstance(model, torch.nn.Module):
            out = model(ids)
        else:
            out = select(model_logits(model, ids), readout, ids.dim())
        out = out.double()
        if output == "probs":
            out = torch.softmax(out, dim=-1)
        return out.reshape(ids.shape[0], -1)

    return f


@torch.no_grad()
def fourier_tail_bounds(
    model: Any,
    seq_len: int,
    vocab_size: int,
    degree: int = 15,
    rhos: Sequence[float] = (0.5, 0.7, 0.9, 0.95, 0.99),
    n_samples: int = 256,
    noise: str = "paper",
    readout: int | None = -1,
    output: str = "probs",
    batch_size: int = 64,
    seed: int = 0,
) -> dict[str, Any]:
    """Both upper bounds on the output mass at degree ≥ ``degree``, over uniform random sequences.

    ``model``: a `transformers` model (softmax of the logits at ``readout``) or, with ``output="raw"``, any
    callable ids [B, T] → [B] or [B, k]. Returns ``stability_bound``, ``sensitivity_bound`` (raw masses),
    ``*_fraction`` (divided by E‖f‖²), ``influences`` [seq_len], ``average_sensitivity``, ``norm_sq``,
    ``best_rho``, its noise eigenvalue ``lambda`` and the per-ρ bounds.
    """
    check_noise(noise)
    if degree < 1:
        raise NoiseStabilityError(f"degree must be >= 1, got {degree}")
    if seq_len < 1 or vocab_size < 2:
        raise NoiseStabilityError(f"need seq_len >= 1 and vocab_size >= 2, got {seq_len}, {vocab_size}")
    was = getattr(model, "training", False)
    if isinstance(model, torch.nn.Module):
        model.eval()
    f = _outputs(model, output, readout)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab_size, (n_samples, seq_len), generator=gen)

    def batched(ids: torch.Tensor) -> torch.Tensor:
        return torch.cat([f(ids[i : i + batch_size]) for i in range(0, len(ids), batch_size)])

    fx = batched(x)
    norm_sq = float((fx * fx).sum(-1).mean())
    per_rho = {}
    for rho in rhos:
        lam = noise_eigenvalue(rho, noise)
        y = correlated_tokens(x, rho, vocab_size, noise, None, gen)
        stab = float((fx * batched(y)).sum(-1).mean())
        denom = 1.0 - lam**degree
        per_rho[float(rho)] = {
            "lambda": lam,
            "stability": stab,
            "bound": (norm_sq - stab) / denom if denom > 0 else float("inf"),
        }
    influences = []
    for i in range(seq_len):
        xi = x.clone()
        xi[:, i] = torch.randint(0, vocab_size, (n_samples,), generator=gen)
        diff = fx - batched(xi)
        influences.append(0.5 * float((diff * diff).sum(-1).mean()))
    avg_sens = sum(influences)
    best = min(per_rho, key=lambda r: per_rho[r]["bound"])
    if was and isinstance(model, torch.nn.Module):
        model.train()
    stab_bound = max(per_rho[best]["bound"], 0.0)
    sens_bound = avg_sens / degree
    frac = (lambda v: v / norm_sq) if norm_sq > 0 else (lambda v: float("nan"))
    return {
        "degree": degree,
        "stability_bound": stab_bound,
        "sensitivity_bound": sens_bound,
        "stability_bound_fraction": frac(stab_bound),
        "sensitivity_bound_fraction": frac(sens_bound),
        "influences": influences,
        "average_sensitivity": avg_sens,
        "norm_sq": norm_sq,
        "best_rho": best,
        "lambda": per_rho[best]["lambda"],
        "noise": noise,
        "per_rho": per_rho,
        "n_samples": n_samples,
        "seq_len": seq_len,
        "vocab_size": vocab_size,
    }
