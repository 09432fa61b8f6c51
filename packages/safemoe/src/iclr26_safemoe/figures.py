"""The reproduce run's figures and its arms table (drawn from the numbers in ``metrics.json``)."""

from __future__ import annotations

from statistics import mean
from typing import Any

from iclr26_core.report import pyplot, save_figure


def table_md(rows: list[dict[str, Any]]) -> str:
    """The base / attacked / defended / defended-without-attack (+ peers) table as Markdown."""
    lines = [
        "| arm | harmfulness | task-B token acc | task-B exact | harmful drift (KL) | train s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {r['harmfulness']:.3f} | {r['token_accuracy']:.3f} | {r['exact_match']:.3f} "
            f"| {r['drift_harmful']:.3g} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


def fig_drift(main: dict, run_dir) -> str:
    """Per-layer drift (KL at t*, τ = 1) of SFT and SafeMoE on harmful and benign prompts."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    L = len(main["base"]["drift_harmful_per_layer"])
    pairs = [(a, k) for a in ("sft", "safemoe") for k in ("harmful", "benign")]
    for j, (arm, kind) in enumerate(pairs):
        rows = main["arms"][arm]
        vals = [mean(r[f"drift_{kind}_per_layer"][i] for r in rows) for i in range(L)]
        ax.bar([i + 0.2 * j - 0.3 for i in range(L)], vals, width=0.2, label=f"{arm} / {kind}")
    ax.set_xlabel("MoE layer")
    ax.set_ylabel("KL(ref || current) at t*, tau=1")
    ax.set_xticks(list(range(L)))
    ax.legend(fontsize=7)
    return save_figure(fig, run_dir / "drift_per_layer.png")


def fig_heatmap(main: dict, run_dir) -> str:
    """Expert selection frequency at t* of the aligned model, harmful vs benign prompts."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7, 2.5))
    for ax, kind in zip(axes, ("harmful", "benign"), strict=True):
        im = ax.imshow(main["frequency"][kind], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_title(f"{kind} prompts")
        ax.set_xlabel("expert")
        ax.set_ylabel("layer")
    fig.colorbar(im, ax=axes)
    return save_figure(fig, run_dir / "routing_heatmap.png")


def sweep_points(main: dict) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """The τ sweep averaged over its seeds: {"KL": [(τ/σ, means)], "KL·τ²": [...]} sorted by τ/σ."""
    groups: dict[tuple[str, float], list[dict]] = {}
    for r in main.get("tau_sweep", []):
        key = ("KL·τ²" if r["tau2_scaling"] else "KL", float(r["tau_over_sigma"]))
        groups.setdefault(key, []).append(r)
    out: dict[str, list[tuple[float, dict[str, float]]]] = {}
    for (name, ratio), rows in sorted(groups.items()):
        keys = ("harmfulness", "token_accuracy", "drift_harmful")
        out.setdefault(name, []).append((ratio, {k: float(mean(r[k] for r in rows)) for k in keys}))
    return out


def fig_tau_sweep(main: dict, temp: dict, run_dir) -> str:
    """The τ ablation: harmfulness, task-B token accuracy and harmful drift against τ/σ (log x), for the
    paper's KL and the KL·τ² variant, with SFT's level and the headline τ/σ marked."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    pts = sweep_points(main)
    sft = main["arms"]["sft"]
    for ax, key, label in zip(
        axes,
        ("harmfulness", "token_accuracy", "drift_harmful"),
        ("harmfulness", "task-B token accuracy", "harmful drift (KL, tau=1)"),
        strict=True,
    ):
        for name, series in pts.items():
            ax.plot([x for x, _ in series], [v[key] for _, v in series], "o-", label=f"SafeMoE, {name}")
        ax.axhline(mean(r[key] for r in sft), color="grey", ls="--", label="SFT (no defence)")
        ax.axvline(temp["tau_over_sigma"], color="k", ls=":", lw=1, label="headline tau/sigma")
        ax.set_xscale("log")
        ax.set_xlabel("tau / sigma(router logits)")
        ax.set_title(label, fontsize=9)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    return save_figure(fig, run_dir / "tau_sweep.png")
