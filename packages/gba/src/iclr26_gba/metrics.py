"""How well an SAE recovers features: FRR, MCC, FVU, L0, dead fraction, cross-seed consistency.

    FRR(τ) = (1/n)·#{i : max_m cos(d_m, v_i) > τ}        d_m: decoder directions [M, d], v_i: true features [n, d]
    MCC    = mean cosine of the Hungarian (maximum-weight) matching between true and learned directions
    FVU    = Σ‖x − x̂‖² / Σ‖x − x̄‖²                    L0 = mean number of active neurons per row
    dead   = fraction of neurons that never fire on the evaluation rows
    consistency(A, B) = fraction of selected neurons of A whose max cosine to any direction of B exceeds τ
Cosines are signed: a flipped direction does not count as recovered (codes are non-negative).
"""

from __future__ import annotations

import torch

from .errors import GBAError


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[P, Q] cosines between the rows of a [P, d] and b [Q, d]."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise GBAError(
            f"dictionaries must be [*, d] with the same d, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    a = a.detach().double()
    b = b.detach().double()
    a = a / a.norm(dim=1, keepdim=True).clamp_min(1e-12)
    b = b / b.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return a @ b.T


def max_cosines(dictionary: torch.Tensor, true_features: torch.Tensor) -> torch.Tensor:
    """[n]: for each true feature, its best cosine with any learned direction."""
    return cosine_matrix(true_features, dictionary).max(dim=1).values


def hungarian_mcc(dictionary: torch.Tensor, true_features: torch.Tensor) -> float:
    """Mean cosine of the maximum-weight one-to-one matching (``scipy.optimize.linear_sum_assignment``)."""
    from scipy.optimize import linear_sum_assignment

    c = cosine_matrix(true_features, dictionary).cpu().numpy()
    rows, cols = linear_sum_assignment(c, maximize=True)
    return float(c[rows, cols].mean())


def recovery_metrics(dictionary: torch.Tensor, true_features: torch.Tensor, taus=(0.8, 0.9)) -> dict:
    """{"frr@τ": …, "mcc": …, "max_cos": [n]} of learned ``dictionary`` [M, d] against ``true_features`` [n, d]."""
    best = max_cosines(dictionary, true_features)
    out = {f"frr@{t:g}": float((best > t).double().mean()) for t in taus}
    out["mcc"] = hungarian_mcc(dictionary, true_features)
    out["max_cos"] = best.tolist()
    return out


@torch.no_grad()
def sae_metrics(sae, x, batch_size: int = 4096) -> dict:
    """{"fvu", "l0", "dead_fraction", "firing_frequency" [M]} of ``sae`` on rows x [N, d] (caller's units).

    ``x`` may also be an iterable of [n_i, d] chunks (e.g. `ActivationStore.chunks()`): one streamed pass,
    Σ‖x − x̄‖² = Σ‖x‖² − N‖x̄‖² accumulated in float64.
    """
    chunks = [x] if isinstance(x, torch.Tensor) else x
    dev = sae.input_scale.device
    sse, sq, n = 0.0, 0.0, 0
    total = torch.zeros(sae.d, dtype=torch.float64)
    fires = torch.zeros(sae.n_neurons, dtype=torch.float64)
    l0 = 0.0
    for chunk in chunks:
        chunk = sae.check_input(chunk)
        if not bool(torch.isfinite(chunk).all()):
            raise GBAError("evaluation data contains NaN or infinite activations")
        for i in range(0, chunk.shape[0], batch_size):
            xb = chunk[i : i + batch_size].to(dev)
            x_hat, z = sae(xb)
            sse += float(((xb - x_hat) ** 2).sum())
            active = z > 0
            fires += active.sum(0).double().cpu()
            l0 += float(active.sum())
            xd = xb.double().cpu()
            sq += float((xd**2).sum())
            total += xd.sum(0)
            n += xb.shape[0]
    if n < 2:
        raise GBAError("need at least 2 rows to evaluate an SAE")
    sst = sq - float((total**2).sum()) / n
    freq = fires / n
    return {
        "fvu": sse / max(sst, 1e-30),
        "l0": l0 / n,
        "dead_fraction": float((freq == 0).double().mean()),
        "firing_frequency": freq,
    }


def scores(rec: dict, ev: dict) -> dict:
    """The six numbers every SAE row reports: FRR@0.8/0.9 and MCC of `recovery_metrics`, L0, FVU and the dead
    fraction of `sae_metrics`."""
    return {k: rec[k] for k in ("frr@0.8", "frr@0.9", "mcc")} | {
        k: ev[k] for k in ("l0", "fvu", "dead_fraction")
    }


def cross_seed_consistency(
    dict_a: torch.Tensor,
    dict_b: torch.Tensor,
    tau: float = 0.9,
    top_alpha: float | None = None,
    freqs_a: torch.Tensor | None = None,
) -> float:
    """Fraction of selected neurons of A whose max cosine to any decoder direction of B exceeds ``tau``.

    Selection: the alive neurons of A (``freqs_a > 0``) when ``freqs_a`` is given, else all rows; with
    ``top_alpha`` ∈ (0, 1], only the top-α fraction of the alive ones by firing frequency (our reading of the
    paper's unstated "top-α" rule).
    """
    idx = torch.arange(dict_a.shape[0])
    if freqs_a is not None:
        freqs_a = torch.as_tensor(freqs_a).double()
        if freqs_a.shape != (dict_a.shape[0],):
            raise GBAError(f"freqs_a must have shape [{dict_a.shape[0]}], got {tuple(freqs_a.shape)}")
        idx = idx[freqs_a > 0]
        if top_alpha is not None:
            if not 0 < top_alpha <= 1:
                raise GBAError(f"top_alpha must be in (0, 1], got {top_alpha}")
            n_keep = max(1, round(top_alpha * len(idx)))
            idx = idx[freqs_a[idx].argsort(descending=True)[:n_keep]]
    elif top_alpha is not None:
        raise GBAError("top_alpha needs freqs_a (the firing frequencies of A)")
    if len(idx) == 0:
        return 0.0
    best = cosine_matrix(dict_a[idx], dict_b).max(dim=1).values
    return float((best > tau).double().mean())
