"""Neuron resonance: recovery peaks when a neuron's firing frequency p matches the feature frequency f.

The sweep trains single-group BA SAEs (K = 1, target p) on the sparse superposition model for several
ratios p/f and records FRR(τ) of each — the paper's "resonance band" (narrow when d < √n).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .metrics import recovery_metrics, sae_metrics, scores
from .seeding import generator
from .statistical_model import SparseFeatureModel
from .training import train_sae


def resonance_sweep(
    model: SparseFeatureModel,
    ratios: Sequence[float],
    *,
    n_neurons: int,
    steps: int,
    batch_size: int = 512,
    lr: float = 1e-3,
    every: int = 10,
    seed: int = 0,
    eval_rows: int = 8192,
    progress: Callable | None = None,
    pool_rows: int | None = None,
    **train_kw,
) -> list[dict]:
    """One BA run per ratio p/f (f = mean feature frequency): [{"ratio", "p", "frr@0.8", "frr@0.9", "mcc",
    "l0", "fvu", "dead_fraction"}]. With ``pool_rows`` every run trains on the same fixed sample of that many
    rows (cheaper than a fresh stream); otherwise on the model's seeded stream."""
    f = float(model.frequencies.mean())
    x_eval = model.sample(eval_rows, generator(seed, "resonance-eval"))[0]
    data = model if not pool_rows else model.sample(int(pool_rows), generator(seed, "resonance-pool"))[0]
    rows = []
    it = ratios if progress is None else progress(ratios, total=len(ratios), desc="resonance")
    for ratio in it:
        p = min(1.0, float(ratio) * f)
        res = train_sae(
            data,
            method="ba",
            n_neurons=n_neurons,
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            htf=p,
            every=every,
            **train_kw,
        )
        rec = recovery_metrics(res.sae.decoder_directions(), model.features)
        ev = sae_metrics(res.sae, x_eval)
        rows.append(
            {
                "ratio": float(ratio),
                "p": p,
                **scores(rec, ev),
                "seconds": res.seconds,
            }
        )
    return rows
