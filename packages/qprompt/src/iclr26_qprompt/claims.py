"""The verdict rules of claims C1–C4, applied to measured numbers (``metrics.json`` holds the same numbers, and
the tests recompute every verdict from it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr26_core.report import Claim

from .data import TARGET_DOMAINS


def paired_deltas(runs: dict[str, list[dict]]) -> list[float]:
    """Δ_s = target mIoU(GRQA) − target mIoU(plain) for each seed s (same init, data and batches)."""
    return [g["target"] - p["target"] for p, g in zip(runs["plain"], runs["grqa"], strict=True)]


def _noise_note(runs: dict[str, list[dict]], tolerance: float) -> tuple[str, dict[str, Any]]:
    from .experiment import not_converged

    deltas = paired_deltas(runs)
    base = [r["target"] for r in runs["plain"]]
    std = float(np.std(base, ddof=1)) if len(base) > 1 else float("nan")
    mean = float(np.mean(deltas))
    per_domain = {
        d: float(
            np.mean([g["miou"][d] - p["miou"][d] for p, g in zip(runs["plain"], runs["grqa"], strict=True)])
        )
        for d in ("source", *TARGET_DOMAINS)
    }
    parts = []
    if not np.isfinite(std):
        parts.append("one seed: no noise estimate")
    elif abs(mean) < std:
        parts.append(f"within noise: |mean Δ| {abs(mean):.4f} < baseline seed std {std:.4f}")
    else:
        parts.append(f"|mean Δ| {abs(mean):.4f} >= baseline seed std {std:.4f}")
    if min(deltas) < 0 < max(deltas):
        parts.append("Δ changes sign across seeds")
    parts.append("mean Δ per domain " + ", ".join(f"{d} {v:+.4f}" for d, v in per_domain.items()))
    stale = [arm for arm in ("plain", "grqa") for r in runs[arm] if not_converged(r["curve"], tolerance)]
    if stale:
        parts.append(f"not converged ({len(stale)} runs: source mIoU rose > {tolerance} over the last half)")
    measured = {
        "delta_per_seed": deltas,
        "mean_delta": mean,
        "plain_target": float(np.mean(base)),
        "grqa_target": float(np.mean([r["target"] for r in runs["grqa"]])),
        "baseline_seed_std": std,
    }
    return "; ".join(parts), measured


def c1(speed: dict[str, dict[str, float]]) -> Claim:
    q, e, m = (speed[k]["overhead"] for k in ("QPrompt", "EoMT-4", "Mask2Former"))
    size = speed["QPrompt"].get("image_size", "?")
    ms = ", ".join(f"{k} {v['ms']:.1f} ms (IQR {v['ms_iqr']:.1f})" for k, v in speed.items())
    return Claim(
        id="C1",
        claim="queries only in the last block remove the decoder overhead (real time)",
        paper="54 FPS (GPU, DINOv2-L)",
        measured={"overhead QPrompt": q, "overhead EoMT-4": e, "overhead Mask2Former": m},
        holds=bool(q < e and q <= 0.5 * m),
        rule="FLOP overhead(QPrompt) < overhead(EoMT-4) and <= 0.5 x overhead(Mask2Former)",
        note=f"overhead = FLOPs(full + post-processing)/FLOPs(backbone) - 1 at {size}x{size}, batch 1; timed: {ms}",
    )


def _reading(arm: dict[str, Any] | None) -> str:
    return f"{arm['objective']}, λ = {arm['weight']:g}" if arm else "GRQA"


def _paired(
    cid: str, claim: str, paper: str, rule: str, runs: dict[str, list[dict]], tol: float, arms: dict | None
) -> Claim:
    """C2 and C3 share one rule: the paired Δ target mIoU (with GRQA - plain) is > 0 in every seed. ``arms`` names
    the GRQA readings (``metrics["grqa_arms"]``); a "spec" arm in ``runs`` is reported beside, not judged."""
    arms = arms or {}
    note, measured = _noise_note(runs, tol)
    holds = bool(all(d > 0 for d in measured["delta_per_seed"]))
    note = f"GRQA = {_reading(arms.get('grqa'))}; {note}"
    if runs.get("spec"):
        spec = [s["target"] - p["target"] for p, s in zip(runs["plain"], runs["spec"], strict=False)]
        measured["spec_delta_per_seed"] = spec
        deltas = ", ".join(f"{d:+.4f}" for d in spec)
        note += f"; spec's reading ({_reading(arms.get('spec'))}) as an extra arm: Δ {deltas} ({len(spec)} seed{'s' * (len(spec) > 1)})"
    return Claim(id=cid, claim=claim, paper=paper, measured=measured, holds=holds, rule=rule, note=note)


def c2(runs: dict[str, list[dict]], tolerance: float, arms: dict | None = None) -> Claim:
    return _paired(
        "C2",
        "GRQA improves the domain generalisation of QPrompt",
        "qualitative (no QPrompt-only ablation public)",
        "paired Δ target mIoU (GRQA - plain, mean over style/adverse/fog) > 0 in every seed",
        runs,
        tolerance,
        arms,
    )


def c3(runs: dict[str, list[dict]], tolerance: float, arms: dict | None = None) -> Claim:
    return _paired(
        "C3",
        "GRQA is plug-and-play on Mask2Former-head DGSS models",
        "REIN +1.2, SoMA +0.5 mIoU",
        "paired Δ target mIoU (with_grqa(Mask2Former) - plain) > 0 in every seed",
        runs,
        tolerance,
        arms,
    )


def c4(z: dict[str, Any]) -> Claim:
    holds = bool(
        z["same_keys"]
        and z["saved_keys_equal"]
        and z["params_grqa"] == z["params_plain"]
        and z["flops_grqa"] == z["flops_plain"]
        and z["bit_identical"]
    )
    return Claim(
        id="C4",
        claim="GRQA costs nothing at inference",
        paper="without inference-time overhead",
        measured={
            "params": [z["params_grqa"], z["params_plain"]],
            "flops": [z["flops_grqa"], z["flops_plain"]],
            "max |Δ logits|": max(z["max_abs_diff_masks"], z["max_abs_diff_classes"]),
        },
        holds=holds,
        rule="unwrap() has the plain model's state-dict keys, parameter count and FLOPs; logits bit-identical",
        note="[GRQA-trained, plain] with the same weights; the saved model.safetensors has the plain keys",
    )
