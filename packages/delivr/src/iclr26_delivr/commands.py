"""The verbs ``derain`` (a video), ``evaluate`` (a folder of paired clips) and ``convert`` (official weights),
called by cli.py; ``train`` is in train_cmd.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from iclr26_core.errors import UserError


def load_model(path: str | Path):
    """A DeLiVR from a `train` checkpoint or a ``save_pretrained`` directory (safetensors only)."""
    from iclr26_core.checkpoints import load

    from .config import DeLiVRConfig
    from .model import DeLiVR

    path = Path(path)
    if not path.is_dir():
        raise UserError(f"--model {str(path)!r} is not a directory")
    if not (path / "config.json").is_file():
        raise UserError(f"--model {str(path)!r} has no config.json (not a DeLiVR checkpoint)")
    if (path / "meta.json").is_file():  # an iclr26 checkpoint: size and sha256 are verified
        ckpt = load(path)
        cfg = {k: v for k, v in (ckpt.model_config or {}).items() if k != "transformers_version"}
        if cfg.get("model_type") != "delivr":
            raise UserError(
                f"--model {str(path)!r} is not a DeLiVR checkpoint (model_type {cfg.get('model_type')})"
            )
        model = DeLiVR(DeLiVRConfig(**cfg))
        missing, unexpected = model.load_state_dict(ckpt.state_dict, strict=False)
        if missing or unexpected:
            raise UserError(
                f"--model {str(path)!r}: weights do not match the config ({(missing + unexpected)[:3]})"
            )
        return model.eval()
    try:
        return DeLiVR.from_pretrained(path).eval()
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load --model {str(path)!r}: {str(exc).splitlines()[0]}") from None


def _check_tiles(args: argparse.Namespace) -> None:
    if args.tile is not None and args.tile < 1:
        raise UserError(f"--tile must be >= 1, got {args.tile}")
    if args.tile is not None and not 0 <= args.overlap < args.tile:
        raise UserError(f"--overlap must be in [0, --tile), got {args.overlap}")


def derain_cmd(args: argparse.Namespace) -> int:
    """Restore a video; with --target also PSNR/SSIM (RGB and Y) per frame and the flicker error."""
    import numpy as np
    import torch

    from iclr26_core.cli import progress
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .derain import derain
    from .folders import read_video, write_png
    from .scoring import score_video

    final = check_out_dir(args.out)
    _check_tiles(args)
    model = load_model(args.model)
    print(model.config.describe())
    video, names = read_video(args.input)
    target = None
    if args.target is not None:
        target, tnames = read_video(args.target)
        if tnames != names:
            diff = sorted(set(tnames) ^ set(names))[:3] or ["order"]
            raise UserError(f"--target frame names do not match the input's ({', '.join(diff)})")
        if target.shape != video.shape:
            raise UserError(f"--target frames {target.shape} do not match the input's {video.shape}")
    if not np.isfinite(video).all():
        raise UserError("the input frames contain NaN or inf values")
    try:
        out = derain(
            model, video, tile=args.tile, overlap=args.overlap, batch_size=args.batch_size, progress=progress
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    frames = out.permute(0, 2, 3, 1).numpy()
    with staged_dir(final) as tmp:
        for name, frame in zip(names, frames, strict=True):
            write_png(tmp / name, frame)
        if target is not None:
            tt = torch.from_numpy(target).permute(0, 3, 1, 2)
            inp = torch.from_numpy(video).permute(0, 3, 1, 2)
            summary = score_video(out, tt, names, rainy=inp)
            write_json(tmp / "metrics.json", summary)
            m = summary["mean"]
            print(
                f"PSNR RGB {m['psnr_rgb']:.2f} dB (input {summary['input_mean']['psnr_rgb']:.2f}), "
                f"SSIM RGB {m['ssim_rgb']:.4f}, PSNR Y {m['psnr_y']:.2f} dB"
            )
    print(json.dumps({"frames": len(names), "out": str(final)}))
    return 0


def convert_cmd(args: argparse.Namespace) -> int:
    """Official DeLiVR weights (.pth, read with weights_only=True) -> an iclr26 checkpoint `derain` can load."""
    from iclr26_core.checkpoints import save
    from iclr26_core.fs import check_out_dir

    from .convert import load_official

    final = check_out_dir(args.out)
    if not Path(args.official).is_file():
        raise UserError(f"--official {args.official!r} is not a file")
    try:
        model = load_official(args.official, prefer_ema=not args.no_ema)
    except ValueError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    if args.official_mask_order:
        model.config.mask_after_mlp = False
    print(model.config.describe())
    save(final, model, config={"source": str(args.official), "ema": not args.no_ema}, metrics={})
    print(f"converted {sum(p.numel() for p in model.parameters()):,} parameters -> {final}")
    return 0


def evaluate_cmd(args: argparse.Namespace) -> int:
    """Score a model on a folder of paired clips DIR/<sequence>/{rainy,clean}/*.png: PSNR/SSIM (RGB and Y) and
    flicker per frame and per sequence, as a printed table, ``summary.csv``, ``frames.csv`` and ``metrics.json``."""
    import numpy as np
    import torch

    from iclr26_core.cli import progress
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .derain import derain
    from .folders import read_pairs, write_png
    from .scoring import CONVENTION, markdown_table, score_video, summary_rows, to_csv

    final = check_out_dir(args.out)
    _check_tiles(args)
    model = load_model(args.model)
    print(model.config.describe())
    seqs = read_pairs(args.data)
    per_sequence = {}
    restored = {}
    for seq in progress(seqs, desc="evaluate"):
        if not np.isfinite(seq.rainy).all():
            raise UserError(f"sequence {seq.name!r}: the rainy frames contain NaN or inf values")
        rainy = torch.from_numpy(seq.rainy).permute(0, 3, 1, 2)
        clean = torch.from_numpy(seq.clean).permute(0, 3, 1, 2)
        try:
            out = derain(model, rainy, tile=args.tile, overlap=args.overlap, batch_size=args.batch_size)
        except ValueError as exc:
            raise UserError(f"sequence {seq.name!r}: {exc}") from None
        per_sequence[seq.name] = score_video(out, clean, seq.names, rainy=rainy)
        if args.save_frames:
            restored[seq.name] = (seq.names, out)
    rows = summary_rows(per_sequence)
    frames = [{"sequence": k, **r} for k, s in per_sequence.items() for r in s["frames"]]
    table = markdown_table(rows)
    with staged_dir(final) as tmp:
        (tmp / "summary.csv").write_text(to_csv(rows))
        (tmp / "frames.csv").write_text(to_csv(frames))
        (tmp / "report.md").write_text(
            f"Metrics: {CONVENTION}; flicker E = mean|Δŷ − Δy| between frames.\n\n{table}"
        )
        write_json(
            tmp / "metrics.json", {"convention": CONVENTION, "summary": rows, "sequences": per_sequence}
        )
        for name, (names, out) in restored.items():
            (tmp / name).mkdir()
            for n, frame in zip(names, out.permute(0, 2, 3, 1).numpy(), strict=True):
                write_png(tmp / name / n, frame)
    print(table, end="")
    print(f"wrote summary.csv, frames.csv, metrics.json -> {final}")
    return 0
