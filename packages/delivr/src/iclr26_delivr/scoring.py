"""Scores of a restored video against its clean frames (the official convention: RGB uint8, data_range 255,
channel_axis 2; plus BT.601 Y) and the flicker error, per frame and as tables (markdown and CSV)."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import torch

from .loss import flicker_error, frame_metrics

KEYS = ("psnr_rgb", "ssim_rgb", "psnr_y", "ssim_y")
CONVENTION = "RGB and Y (BT.601, 16-235) on uint8 frames, data_range 255"


def score_video(
    restored: torch.Tensor, target: torch.Tensor, names: list[str], rainy: torch.Tensor | None = None
) -> dict[str, Any]:
    """restored/target/rainy [F, 3, H, W] in [0, 1] -> per-frame rows, means, the flicker error (None for one
    frame) and, with ``rainy``, the same numbers for the input."""
    if restored.shape != target.shape:
        raise ValueError(f"restored {tuple(restored.shape)} and target {tuple(target.shape)} differ in shape")
    rows = [{"frame": n, **frame_metrics(o, g)} for n, o, g in zip(names, restored, target, strict=True)]
    out: dict[str, Any] = {
        "mean": {k: float(np.mean([r[k] for r in rows])) for k in KEYS},
        "flicker": flicker_error(restored, target) if len(rows) > 1 else None,
        "convention": CONVENTION,
        "frames": rows,
    }
    if rainy is not None:
        inp = [frame_metrics(i, g) for i, g in zip(rainy, target, strict=True)]
        for row, r in zip(rows, inp, strict=True):
            row.update({f"input_{k}": r[k] for k in KEYS})
        out["input_mean"] = {k: float(np.mean([r[k] for r in inp])) for k in KEYS}
        out["input_flicker"] = flicker_error(rainy, target) if len(rows) > 1 else None
    return out


def summary_rows(per_sequence: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per sequence and a last ``all`` row (PSNR/SSIM averaged over every frame, flicker over sequences)."""
    rows = []
    for name, s in per_sequence.items():
        rows.append(
            {"sequence": name, "frames": len(s["frames"]), **_numbers(s["mean"], s.get("input_mean"), s)}
        )
    frames = [r for s in per_sequence.values() for r in s["frames"]]
    flick = [s["flicker"] for s in per_sequence.values() if s["flicker"] is not None]
    iflick = [s["input_flicker"] for s in per_sequence.values() if s.get("input_flicker") is not None]
    mean = {k: float(np.mean([r[k] for r in frames])) for k in KEYS}
    inp = (
        {k: float(np.mean([r[f"input_{k}"] for r in frames])) for k in KEYS}
        if "input_psnr_rgb" in frames[0]
        else None
    )
    total = {
        "flicker": float(np.mean(flick)) if flick else None,
        "input_flicker": float(np.mean(iflick)) if iflick else None,
    }
    rows.append({"sequence": "all", "frames": len(frames), **_numbers(mean, inp, total)})
    return rows


def _numbers(mean: dict, inp: dict | None, s: dict) -> dict[str, Any]:
    row = {**mean, "flicker": s.get("flicker")}
    if inp is not None:
        row.update({f"input_{k}": inp[k] for k in KEYS})
        row["input_flicker"] = s.get("input_flicker")
    return row


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The summary rows as a markdown table (input numbers in brackets when present)."""

    def cell(r: dict, key: str, spec: str) -> str:
        v = r.get(key)
        if v is None:
            return "—"
        inp = r.get(f"input_{key}")
        return format(v, spec) + (f" ({format(inp, spec)})" if inp is not None else "")

    lines = [
        "| sequence | frames | PSNR RGB (input) | SSIM RGB (input) | PSNR Y (input) | SSIM Y (input) | flicker (input) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['sequence']} | {r['frames']} | {cell(r, 'psnr_rgb', '.2f')} | {cell(r, 'ssim_rgb', '.4f')} | "
            f"{cell(r, 'psnr_y', '.2f')} | {cell(r, 'ssim_y', '.4f')} | {cell(r, 'flicker', '.4f')} |"
        )
    return "\n".join(lines) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    """Rows of dicts (the same keys, or a superset in the first row) as CSV text; None -> empty cell."""
    buf = io.StringIO()
    keys = list(dict.fromkeys(k for r in rows for k in r))
    writer = csv.DictWriter(buf, fieldnames=keys)
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})
    return buf.getvalue()
