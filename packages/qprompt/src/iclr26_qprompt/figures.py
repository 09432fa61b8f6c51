"""``examples.png``: image / ground truth / QPrompt / QPrompt-R1 (QPrompt + GRQA) per domain (seed 0 models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .data import DOMAINS
from .folders import palette


def examples_figure(
    run_dir: Path, data: dict[str, Any], runs: dict[str, list[dict]], num_classes: int, index: int = 0
):
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    colours = palette(num_classes)
    fig, axes = plt.subplots(len(DOMAINS), 4, figsize=(8, 2 * len(DOMAINS)))
    for row, dom in enumerate(DOMAINS):
        panels = [
            ("image", data["test"][dom][index]),
            ("ground truth", colours[data["test_labels"][index]]),
            ("QPrompt", colours[runs["plain"][0]["pred"][dom][index]]),
            ("QPrompt-R1", colours[runs["grqa"][0]["pred"][dom][index]]),
        ]
        for col, (title, img) in enumerate(panels):
            ax = axes[row, col]
            ax.imshow(img, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(title, fontsize=9)
            if col == 0:
                ax.set_ylabel(dom, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, Path(run_dir) / "examples.png")
