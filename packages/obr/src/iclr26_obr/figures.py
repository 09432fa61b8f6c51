"""``layer_error.png``: output error per method and setting (synthetic layer), the α ablation, and C5's ΔPPL."""

from __future__ import annotations

import statistics
from pathlib import Path

from iclr26_core.report import pyplot, save_figure

SETTING_ORDER = ("W4+50%", "W4+2:4", "W4 dense")


def layer_error_figure(
    errs: dict[str, dict[str, list[float]]], alphas: list[float], lm: dict, path: Path
) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4), gridspec_kw={"width_ratios": [2.2, 1, 1.2]})
    ax = axes[0]
    settings = [s for s in SETTING_ORDER if s in errs] + sorted(s for s in errs if s.startswith("prune"))
    labels: list[str] = []
    for s in settings:
        labels += [lab for lab in errs[s] if lab not in labels]
    width = 0.8 / max(len(labels), 1)
    for j, lab in enumerate(labels):
        xs, ys, lo, hi = [], [], [], []
        for i, s in enumerate(settings):
            if lab in errs[s]:
                v = errs[s][lab]
                xs.append(i + (j - len(labels) / 2) * width + width / 2)
                ys.append(statistics.fmean(v))
                lo.append(ys[-1] - min(v))
                hi.append(max(v) - ys[-1])
        ax.bar(xs, ys, width, yerr=[lo, hi], label=lab, capsize=2)
    ax.set_xticks(range(len(settings)), settings)
    ax.set_yscale("log")
    ax.set_ylabel("held-out ‖WX − ŴX‖² / ‖WX‖²")
    ax.set_title("synthetic rotated layer (mean, min-max over seeds)")
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    for lab in ("OBR_GPTQ", "OBR_RTN"):
        ax.plot(alphas, [statistics.fmean(errs[f"alpha={a:g}"][lab]) for a in alphas], "o-", label=lab)
    ax.set_xlabel("α (fraction of columns whose quantisation error is evicted)")
    ax.set_ylabel("output error")
    ax.set_title("α ablation, W4 + 50 % (no verdict)")
    ax.legend(fontsize=8)
    ax = axes[2]
    per_seed = lm.get("per_seed", [])
    methods = list(per_seed[0]["delta"]) if per_seed else []
    width = 0.8 / max(len(per_seed), 1)
    for k, row in enumerate(per_seed):
        ax.bar(
            [i + (k - len(per_seed) / 2) * width + width / 2 for i in range(len(methods))],
            [row["delta"][m] for m in methods],
            width,
            label=f"seed {row['seed']} (dense {row['ppl_dense']:.1f})",
        )
    ax.set_xticks(range(len(methods)), methods, rotation=20, fontsize=8)
    ax.set_ylabel("PPL increase over dense")
    ax.set_title("C5: tiny llama, W4 + 50 %")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)
