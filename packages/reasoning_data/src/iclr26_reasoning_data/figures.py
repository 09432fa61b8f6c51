"""Figures and the peers page of a reproduce run: ``arms.png`` (accuracy per arm, base vs after SFT, one point
per run), ``families.png`` (per-family accuracy heat map), ``peers.md``."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from iclr26_core.report import pyplot, save_figure

from .tasks import FAMILY_NAMES

ORDER = [
    "P_direct->S_hq",
    "P0->S_hq",
    "P_div->S_hq",
    "P_hq->S_hq",
    "P_hq-bad->S_hq",
    "P_div->S_bad",
    "P_div->S_big",
    "P0->S_hq2",
    "P0->S_move",
    "P0->S_hq@160",
    "P_div->S_hq@160",
    "P_div->S_big@160",
]


def _arms(acc: Any) -> list[str]:
    have = {a.rsplit("/", 1)[0] for p in acc.pseeds for a in acc.runs[p]}
    return [a for a in ORDER if a in have] + sorted(have - set(ORDER))


def per_family(acc: Any) -> dict[str, list[float]]:
    """{arm: [accuracy of family f, mean over every run]} after SFT."""
    out = {}
    for arm in _arms(acc):
        rows = [
            acc.runs[p][f"{arm}/s{s}"]["sft"]["eval"]["per_family"]
            for p in acc.pseeds
            for s in range(acc.sft_seeds)
            if f"{arm}/s{s}" in acc.runs[p]
        ]
        fams = sorted(rows[0], key=int)
        out[arm] = [statistics.fmean(float(r[f]) for r in rows) for f in fams]
    return out


def arms_md(acc: Any, base: dict[str, Any]) -> str:
    """The arms table: accuracy after SFT (all problems, non-majority problems), base accuracy, and the
    answer-prior baselines beside every arm."""
    maj, chance = base["majority"], base["chance"]
    lines = [
        "| arm | acc after SFT | per pretraining seed | non-majority acc | base acc (before SFT) | majority | chance |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm in _arms(acc):
        pre = arm.split("->")[0]
        b = statistics.fmean(acc.base(pre, p) for p in acc.pseeds) if acc.has(f"{pre}->S_hq") else None
        seeds = " / ".join(f"{acc.acc(arm, p):.3f}" for p in acc.pseeds)
        bt = "" if b is None else f"{b:.3f}"
        lines.append(
            f"| {arm} | {acc.mean(arm):.3f} | {seeds} | {acc.rare_mean(arm):.3f} | {bt} | {maj:.3f} | {chance:.3f} |"
        )
    return "\n".join(lines)


def arms_png(path: Path, acc: Any, base: dict[str, Any] | None = None) -> str:
    plt = pyplot()
    arms = _arms(acc)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.75 * len(arms)), 3.8))
    if base is not None:
        ax.axhline(base["majority"], color="tab:orange", ls="--", lw=1, label="majority-answer baseline")
        ax.axhline(base["chance"], color="tab:gray", ls=":", lw=1, label="chance")
    for i, arm in enumerate(arms):
        pts = [x for p in acc.pseeds for x in acc.per_seed(arm, p)]
        ax.bar(i, statistics.fmean(pts), color="tab:blue", alpha=0.6, label="after SFT" if i == 0 else None)
        ax.scatter([i] * len(pts), pts, color="k", s=10, zorder=3, label="one run" if i == 0 else None)
        pre = arm.split("->")[0]
        base = [acc.base(pre, p) for p in acc.pseeds]
        ax.scatter(
            [i - 0.3] * len(base),
            base,
            marker="_",
            s=160,
            color="tab:red",
            label="base (after pretraining)" if i == 0 else None,
        )
    ax.set_xticks(range(len(arms)), arms, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("exact match (mean over families)")
    ax.set_title("accuracy per arm (bar: mean over seeds; dots: pretraining x SFT seeds)")
    ax.legend(fontsize=7, loc="upper right")
    return save_figure(fig, path)


def families_png(path: Path, acc: Any) -> str:
    plt = pyplot()
    pf = per_family(acc)
    arms = list(pf)
    fig, ax = plt.subplots(figsize=(7.5, 0.4 * len(arms) + 1.6))
    im = ax.imshow([pf[a] for a in arms], vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_yticks(range(len(arms)), arms, fontsize=8)
    n = len(next(iter(pf.values())))
    ax.set_xticks(
        range(n), [f"F{f}\n{FAMILY_NAMES[f].split()[1] if f < 8 else ''}" for f in range(n)], fontsize=7
    )
    for i, a in enumerate(arms):
        for j, v in enumerate(pf[a]):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w" if v < 0.6 else "k")
    fig.colorbar(im, ax=ax, label="exact match after SFT")
    ax.set_title("per-family accuracy after SFT (mean over runs)")
    return save_figure(fig, path)


def peers_md(peers: dict[str, Any], ours_acc: float) -> str:
    lines = ["# Peers: the same stages through established libraries", ""]
    t = peers.get("trl", {})
    if "missing" in t or not t:
        lines += ["- trl: not installed", ""]
    else:
        lines += [
            f"## trl SFTTrainer (completion-only loss), {t['steps']} steps from P_div's pretrained weights",
            "",
            f"- loss on one batch: trl {t['step1_loss_trl']:.7f}, ours {t['step1_loss_ours']:.7f} "
            f"(|diff| {t['step1_abs_diff']:.2e})",
            f"- accuracy after SFT: trl {t['eval']['mean']:.3f}, ours {ours_acc:.3f}",
            f"- trl training loss first/last: {t['first_loss']:.4f} / {t['final_loss']:.4f}",
            "",
        ]
    h = peers.get("trainer", {})
    if h and "missing" not in h:
        lines += [
            f"## transformers Trainer on the packed P_div pretraining stage ({h['steps']} steps, same order)",
            "",
            "| step | ours | Trainer | abs diff |",
            "| --- | --- | --- | --- |",
            *[
                f"| {i + 1} | {a:.6f} | {b:.6f} | {abs(a - b):.1e} |"
                for i, (a, b) in enumerate(zip(h["losses_ours"], h["losses_trainer"], strict=True))
            ],
            "",
        ]
    d = peers.get("datatrove", {})
    if d:
        lines += [
            "## Achieved token fractions on the P_div mixture spec",
            "",
            "| source | requested | ours | datatrove |",
            "| --- | --- | --- | --- |",
        ]
        for k, w in d["requested"].items():
            theirs = f"{d['datatrove'][k]:.4f}" if "datatrove" in d else "not installed"
            lines.append(f"| {k} | {w:.4f} | {d['ours'][k]:.4f} | {theirs} |")
        lines.append("")
    e = peers.get("lm_eval", {})
    if e and "missing" not in e:
        lines += [
            "## lm-eval HFLM generate_until vs our generation (P_div->S_hq, seed 0)",
            "",
            f"- {e['n']} problems: accuracy lm-eval {e['acc_lm_eval']:.3f}, ours {e['acc_ours']:.3f}; "
            f"same extracted answer on {100 * e['agreement']:.1f} %",
            "",
        ]
    return "\n".join(lines)
