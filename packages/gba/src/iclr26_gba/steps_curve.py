"""FRR against optimiser steps: how long bias adaptation takes to recover the features from its start.

`FRRTrace` is a `train_sae` callback that scores the decoder directions every ``every`` steps
(FRR(τ) = (1/n)·#{i : max_m cos(d_m, v_i) > τ}, the same formula as `recovery_metrics`), plus the mean
neuron bias — the quantity whose slow descent from b = 0 delays recovery (see the package README).
`plot_steps` draws FRR@0.9 against steps for several runs (``steps.png``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from .metrics import max_cosines


class FRRTrace:
    """Callback ``(step, sae)``: every ``every`` steps appends {"step", "frr@0.8", "frr@0.9", "mean_bias"}."""

    def __init__(self, features: torch.Tensor, every: int = 250) -> None:
        self.features = features
        self.every = max(1, int(every))
        self.rows: list[dict[str, float]] = []

    @torch.no_grad()
    def __call__(self, step: int, sae) -> None:
        if step % self.every:
            return
        best = max_cosines(sae.decoder_directions().detach().cpu(), self.features)
        row = {
            "step": int(step),
            "frr@0.8": round(float((best > 0.8).double().mean()), 4),
            "frr@0.9": round(float((best > 0.9).double().mean()), 4),
        }
        if hasattr(sae, "b"):
            row["mean_bias"] = round(float(sae.b.detach().mean()), 4)
        self.rows.append(row)


def first_step_reaching(rows: Sequence[dict], key: str, value: float) -> int | None:
    """The first traced step at which ``row[key] >= value`` (None if never)."""
    for r in rows:
        if r[key] >= value:
            return int(r["step"])
    return None


def plot_steps(curves: dict[str, Sequence[dict]], path: str | Path, key: str = "frr@0.9") -> str:
    """``key`` against optimiser steps, one line per run (label → trace rows)."""
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for label, rows in curves.items():
        if rows:
            ax.plot([r["step"] for r in rows], [r[key] for r in rows], label=label)
    ax.set_xlabel("optimiser steps")
    ax.set_ylabel(key.upper().replace("FRR@", "FRR@"))
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("feature recovery against steps (C1 toy)")
    return save_figure(fig, path)
