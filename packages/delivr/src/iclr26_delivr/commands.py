"""The verbs ``train`` (a user's paired frame folders) and ``derain`` (a video), called by cli.py."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

from iclr26_core.errors import UserError


def _model_config(cfg_model):
    from omegaconf import OmegaConf

    from .config import DeLiVRConfig

    try:
        return DeLiVRConfig(**OmegaConf.to_container(cfg_model))
    except (ValueError, TypeError) as exc:
        raise UserError(f"bad model setting: {exc}") from None


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


def train(args: argparse.Namespace) -> int:
    """Train DeLiVR on DIR/<sequence>/{rainy,clean}/*.png; write a checkpoint and train_log.csv to --out."""
    import torch

    from iclr26_core.checkpoints import save
    from iclr26_core.cli import compose, pick_device
    from iclr26_core.fs import atomic_write_text, check_out_dir

    from .experiment import predict, psnr_uint8
    from .folders import read_pairs
    from .model import DeLiVR
    from .train import TrainSettings, augment, train_delivr

    final = check_out_dir(args.out)
    cfg = compose("iclr26_delivr.conf", "train", args.overrides)
    if int(cfg.threads) > 0:
        torch.set_num_threads(int(cfg.threads))
    mcfg = _model_config(cfg.model)
    seqs = read_pairs(args.data)
    val_name = cfg.data.val
    if val_name is not None and val_name not in {s.name for s in seqs}:
        raise UserError(
            f"data.val={val_name!r} is not one of the sequences: {', '.join(s.name for s in seqs)}"
        )
    train_seqs = [s for s in seqs if s.name != val_name] or seqs
    val = next((s for s in seqs if s.name == val_name), None)
    tensors = [
        (torch.from_numpy(s.rainy).permute(0, 3, 1, 2), torch.from_numpy(s.clean).permute(0, 3, 1, 2))
        for s in train_seqs
    ]
    windows = [(i, f) for i, (r, _) in enumerate(tensors) for f in range(len(r))]
    t, c, crop = mcfg.frames, (mcfg.frames - 1) // 2, int(cfg.data.crop)
    gen = torch.Generator().manual_seed(int(cfg.seed))

    def window(video: torch.Tensor, f: int) -> torch.Tensor:
        idx = [min(max(f + d, 0), len(video) - 1) for d in range(-c, t - c)]
        return video[idx]

    def sample(step: int):
        frames, targets = [], []
        for _ in range(int(cfg.train.batch)):
            i, f = windows[int(torch.randint(len(windows), (1,), generator=gen))]
            rainy, clean = tensors[i]
            h, w = rainy.shape[-2:]
            ch, cw = min(crop, h), min(crop, w)
            y = int(torch.randint(h - ch + 1, (1,), generator=gen))
            x = int(torch.randint(w - cw + 1, (1,), generator=gen))
            frames.append(window(rainy, f)[..., y : y + ch, x : x + cw])
            targets.append(clean[f, :, y : y + ch, x : x + cw])
        frames_, targets_ = torch.stack(frames), torch.stack(targets)
        return augment(frames_, targets_, gen) if bool(cfg.data.augment) else (frames_, targets_)

    evaluate = None
    if val is not None:
        vr = torch.from_numpy(val.rainy).permute(0, 3, 1, 2)
        vc = torch.from_numpy(val.clean).permute(0, 3, 1, 2)
        clips = torch.stack([window(vr, f) for f in range(len(vr))])

        def evaluate(m) -> float:
            return float(psnr_uint8(predict(m, clips, batch=1)[0], vc).mean())

    torch.manual_seed(int(cfg.seed))
    device = pick_device(cfg.device)
    model = DeLiVR(mcfg).to(device)
    print(mcfg.describe())
    settings = TrainSettings(
        steps=int(cfg.train.steps),
        batch_size=int(cfg.train.batch),
        lr=float(cfg.train.lr),
        weight_decay=float(cfg.train.weight_decay),
        schedule=str(cfg.train.schedule),
        warmup_steps=int(cfg.train.warmup),
        grad_clip=float(cfg.train.grad_clip),
        ema=float(cfg.train.ema),
        eval_every=int(cfg.train.eval_every),
        seed=int(cfg.seed),
        device=device,
    )
    model, log = train_delivr(model, sample, settings, evaluate=evaluate)
    buf = io.StringIO()
    writer = csv.writer(buf)
    keys = list(log.terms[0]) if log.terms else ["total"]
    evals = dict(log.evals)
    writer.writerow(["step", *keys, "val_psnr"])
    for step, row in enumerate(log.terms, start=1):
        writer.writerow(
            [step, *(f"{row[k]:.6g}" for k in keys), f"{evals[step]:.4f}" if step in evals else ""]
        )
    metrics = {
        "final_loss": log.losses[-1] if log.losses else None,
        "val_psnr": log.evals[-1][1] if log.evals else None,
        "seconds": log.seconds,
        "sequences": [s.name for s in train_seqs],
        "val": val_name,
        "frames_seen": settings.steps * settings.batch_size,
    }
    from omegaconf import OmegaConf

    save(final, model, config=OmegaConf.to_container(cfg), metrics=metrics)
    atomic_write_text(final / "train_log.csv", buf.getvalue())
    print(f"trained {settings.steps} steps in {log.seconds:.1f} s -> {final}")
    return 0


def derain_cmd(args: argparse.Namespace) -> int:
    """Restore a video; with --target also PSNR/SSIM (RGB and Y) per frame and the flicker error."""
    import numpy as np
    import torch

    from iclr26_core.cli import progress
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .derain import derain
    from .folders import read_video, write_png
    from .loss import flicker_error, frame_metrics

    final = check_out_dir(args.out)
    if args.tile is not None and args.tile < 1:
        raise UserError(f"--tile must be >= 1, got {args.tile}")
    if args.tile is not None and not 0 <= args.overlap < args.tile:
        raise UserError(f"--overlap must be in [0, --tile), got {args.overlap}")
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
            per = [{"frame": n, **frame_metrics(o, g)} for n, o, g in zip(names, out, tt, strict=True)]
            keys = ["psnr_rgb", "ssim_rgb", "psnr_y", "ssim_y"]
            inp = torch.from_numpy(video).permute(0, 3, 1, 2)
            summary = {
                "mean": {k: float(np.mean([r[k] for r in per])) for k in keys},
                "input_mean": {
                    k: float(np.mean([frame_metrics(i, g)[k] for i, g in zip(inp, tt, strict=True)]))
                    for k in keys
                },
                "flicker": flicker_error(out, tt) if len(out) > 1 else None,
                "input_flicker": flicker_error(inp, tt) if len(out) > 1 else None,
                "convention": "RGB and Y (BT.601, 16-235) on uint8 frames, data_range 255",
                "frames": per,
            }
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
