"""Extra arms of `reproduce`: variants trained beside the headline (the paper's recipe), never replacing it.

``arms`` in the config maps a name to overrides of ``train.*``, ``loss.*`` and ``model.*`` plus ``pair`` (also
train the variant's ablation twin, for a C3/C4-style paired comparison); ``arms.<name>=null`` switches one off. Every seed trains every arm from the
same initial weights and batches as the headline. The rows below the claims table are computed here; they are
not claims (they do not count in "n/5 claims hold").
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from omegaconf import OmegaConf

from iclr26_core.errors import UserError

from .claims import seed_interval

SECTIONS = ("train", "loss", "model")


def arm_configs(cfg) -> dict[str, tuple[Any, bool]]:
    """name -> (the composed config with the arm's overrides merged in, pair); a bad key is one clear line."""
    out = {}
    for name, node in (cfg.get("arms") or {}).items():
        if node is None:  # arms.<name>=null switches an arm off
            continue
        over = OmegaConf.to_container(node, resolve=True)
        pair = bool(over.pop("pair", False))
        bad = sorted(set(over) - set(SECTIONS))
        if bad:
            raise UserError(
                f"arms.{name}: only {', '.join(SECTIONS)} and pair can be set, not {', '.join(bad)}"
            )
        merged = OmegaConf.merge(cfg, over)
        merged.arms = None
        out[str(name)] = (merged, pair)
    return out


def summarise(full: list[dict], abl: list[dict] | None, rainy_psnr: float, overrides: dict) -> dict[str, Any]:
    """One arm's numbers over the seeds (``full``/``abl``: its per-seed measurements): PSNR gain, C5's Spearman
    and angle spans, and with the ablation twin the paired ΔPSNR and flicker reduction with 95 % t-intervals."""
    rhos = [f["spearman"] for f in full]
    row: dict[str, Any] = {
        "overrides": overrides,
        "gain_db_per_seed": [f["psnr"] - rainy_psnr for f in full],
        "spearman_per_seed": rhos,
        "mean_spearman": mean(rhos),
        "relative_pred_range_deg": [
            min(f["relative_pred_range_deg"][0] for f in full),
            max(f["relative_pred_range_deg"][1] for f in full),
        ],
        "angle_grad_image": mean(f["angle_grad"]["image"] for f in full),
        "angle_grad_regularisers": mean(f["angle_grad"]["regularisers"] for f in full),
        "layerscale_attention": [
            min(g for f in full for g in f["layerscale_attention"]),
            max(g for f in full for g in f["layerscale_attention"]),
        ],
    }
    if abl:
        deltas = [f["psnr"] - a["psnr"] for f, a in zip(full, abl, strict=True)]
        flick = [a["flicker"] - f["flicker"] for f, a in zip(full, abl, strict=True)]
        row["delta_db_per_seed"], row["delta_db_ci95"] = deltas, list(seed_interval(deltas)[1:])
        row["flicker_reduction_per_seed"], row["flicker_reduction_ci95"] = (
            flick,
            list(seed_interval(flick)[1:]),
        )
    return row


def _fmt(values: list[float], spec: str) -> str:
    return "[" + ", ".join(format(v, spec) for v in values) + "]"


def table(rows: dict[str, dict[str, Any]], headline: dict[str, Any]) -> str:
    """Markdown table of the extra arms, with the headline (the paper's recipe) as the first row."""
    lines = [
        "Extra arms (beside the headline; not claims):",
        "",
        "| arm | overrides | gain dB per seed | C5 ρ per seed (mean) | θ_t − θ_c range | \\|∂L/∂θ\\| image / reg "
        "| attn \\|γ\\| | ΔPSNR full − ablation, 95% t | flicker reduction, 95% t |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in {"headline": headline, **rows}.items():
        over = ", ".join(f"{s}.{k}={v}" for s, d in r["overrides"].items() for k, v in d.items()) or "—"
        lo, hi = r["relative_pred_range_deg"]
        paired = ("—", "—")
        if "delta_db_per_seed" in r:
            d, e = r["delta_db_ci95"], r["flicker_reduction_ci95"]
            paired = (
                f"{_fmt(r['delta_db_per_seed'], '+.3f')} [{d[0]:+.3f}, {d[1]:+.3f}]",
                f"{_fmt(r['flicker_reduction_per_seed'], '+.1e')} [{e[0]:+.1e}, {e[1]:+.1e}]",
            )
        lines.append(
            f"| {name} | {over} | {_fmt(r['gain_db_per_seed'], '.2f')} | "
            f"{_fmt(r['spearman_per_seed'], '+.2f')} ({r['mean_spearman']:+.3f}) | [{lo:.3g}°, {hi:.3g}°] | "
            f"{r['angle_grad_image']:.1e} / {r['angle_grad_regularisers']:.1e} | "
            f"{r['layerscale_attention'][0]:.2g}–{r['layerscale_attention'][1]:.2g} | {paired[0]} | {paired[1]} |"
        )
    return "\n".join(lines) + "\n"
