"""The two figures: KL over decoding steps, and bytes per block over steps with the budget line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from iclr26_core.report import pyplot, save_figure


def kl_figure(curves: dict[str, Sequence[float]], path: str | Path, title: str = "") -> str:
    """One line per method: KL(FP ‖ method) per decoding step (log scale)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name, kl in curves.items():
        ax.plot(range(1, len(kl) + 1), [max(float(v), 1e-12) for v in kl], label=name, lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("decoding step (cached tokens)")
    ax.set_ylabel("KL(FP ‖ quantised cache)")
    ax.set_title(title or "KL vs the full-precision cache, teacher-forced")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def memory_figure(
    traces: Sequence[Sequence[tuple[int, int, int]]],
    budgets: Sequence[float],
    path: str | Path,
    title: str = "",
) -> str:
    """Bytes of each block's main cache over cached tokens (bits annotated at each change), budgets dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (trace, budget) in enumerate(zip(traces, budgets)):
        tokens = [t for t, _, _ in trace]
        color = f"C{i % 10}"
        ax.plot(tokens, [b / 1024 for _, _, b in trace], color=color, lw=1.2, label=f"block {i}")
        ax.axhline(budget / 1024, color=color, ls="--", lw=0.8)
        last = None
        for t, bits, b in trace:
            if bits != last:
                ax.annotate(f"{bits}b", (t, b / 1024), fontsize=7, color=color)
                last = bits
    ax.set_xlabel("cached tokens")
    ax.set_ylabel("main cache (KiB)")
    ax.set_title(title or "PM-KVQ memory per block (dashed: budget)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)
