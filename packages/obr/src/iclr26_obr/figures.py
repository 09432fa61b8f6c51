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
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2), gridspec_kw={"width_ratios": [2.2, 1, 1.2]})
    ax = axes[0]
    settings = [s for s in SETTING_ORDER if s in errs] + sorted(s for s in errs if s.startswith("prune"))
    labels: list[str] = []
    for s in settings:
        labels += [lab for lab in errs[s] if lab not in labels]
    colors = {lab: plt.get_cmap("tab20")(i % 20) for i, lab in enumerate(labels)}
    seen: set[str] = set()
    for i, s in enumerate(settings):
        present = list(errs[s])
        width = 0.8 / len(present)
        for j, lab in enumerate(present):
            v = errs[s][lab]
            y = statistics.fmean(v)
            ax.bar(
                i - 0.4 + (j + 0.5) * width,
                y,
                width,
                yerr=[[y - min(v)], [max(v) - y]],
                color=colors[lab],
                capsize=2,
                label=None if lab in seen else lab,
            )
            seen.add(lab)
    ax.set_xticks(range(len(settings)), settings)
    ax.set_yscale("log")
    ax.set_ylabel("held-out ‖WX − ŴX‖² / ‖WX‖²")
    ax.set_title("synthetic rotated layer (mean, min-max over seeds)")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.09))
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
