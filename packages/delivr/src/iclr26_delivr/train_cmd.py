"""The ``train`` verb: DeLiVR on a user's paired frame folders ``DIR/<sequence>/{rainy,clean}/*.png``.

Each step draws random T-frame windows (edge frames replicated) and random crops; the batch of a step is a pure
function of (seed, step), so a run resumed from a checkpoint (``--resume``) sees the batches it would have seen
without the interruption. The memory estimate is printed before the first step.
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

from iclr26_core.errors import UserError


def model_config(cfg_model):
    """`DeLiVRConfig` from a composed ``model`` node; a bad value is one clear line."""
    from omegaconf import OmegaConf

    from .config import DeLiVRConfig

    try:
        return DeLiVRConfig(**OmegaConf.to_container(cfg_model))
    except (ValueError, TypeError) as exc:
        raise UserError(f"bad model setting: {exc}") from None


def loss_weights(cfg_loss):
    """`LossWeights` from a composed ``loss`` node (missing keys: the paper's weights)."""
    from dataclasses import fields

    from .loss import LossWeights

    known = {f.name for f in fields(LossWeights)}
    values = dict(cfg_loss or {})
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserError(f"unknown loss weight(s): {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    return LossWeights(**{k: float(v) for k, v in values.items()})


def settings_from(cfg_train, **values):
    """`TrainSettings.from_config` with a bad value as one clear line."""
    from .train import TrainSettings

    try:
        return TrainSettings.from_config(cfg_train, **values)
    except (ValueError, TypeError) as exc:
        raise UserError(f"bad train setting: {exc}") from None


def window_sampler(videos, frames: int, batch: int, crop: int, seed: int, augment: bool):
    """``sample(step) -> (frames [B, T, 3, h, w], target [B, 3, h, w])`` over the (rainy, clean) videos
    [F, 3, H, W]: random windows (edges replicated) and crops; a pure function of (seed, step)."""
    import torch

    from .derain import window_indices
    from .train import augment as official_augment

    windows = [(i, f) for i, (r, _) in enumerate(videos) for f in range(len(r))]
    index = [window_indices(len(r), frames) for r, _ in videos]

    def sample(step: int):
        gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(step))
        clips, targets = [], []
        for _ in range(batch):
            i, f = windows[int(torch.randint(len(windows), (1,), generator=gen))]
            rainy, clean = videos[i]
            h, w = rainy.shape[-2:]
            ch, cw = min(crop, h), min(crop, w)
            y = int(torch.randint(h - ch + 1, (1,), generator=gen))
            x = int(torch.randint(w - cw + 1, (1,), generator=gen))
            clips.append(rainy[index[i][f], :, y : y + ch, x : x + cw])
            targets.append(clean[f, :, y : y + ch, x : x + cw])
        out = torch.stack(clips), torch.stack(targets)
        return official_augment(*out, gen) if augment else out

    return sample


def _log_csv(log) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    keys = list(log.terms[0]) if log.terms else ["total"]
    evals = dict(log.evals)
    writer.writerow(["step", *keys, "val_psnr"])
    for step, row in enumerate(log.terms, start=log.start + 1):
        writer.writerow(
            [step, *(f"{row[k]:.6g}" for k in keys), f"{evals[step]:.4f}" if step in evals else ""]
        )
    return buf.getvalue()


def train(args: argparse.Namespace) -> int:
    """Train DeLiVR on DIR/<sequence>/{rainy,clean}/*.png; write a checkpoint and train_log.csv to --out."""
    import torch
    from omegaconf import OmegaConf

    from iclr26_core.checkpoints import save
    from iclr26_core.cli import compose, pick_device
    from iclr26_core.errors import CheckpointError
    from iclr26_core.fs import atomic_write_text, check_out_dir

    from .derain import window_indices
    from .experiment import predict, psnr_uint8
    from .folders import read_pairs
    from .memory import training_memory
    from .model import DeLiVR
    from .train import train_delivr

    final = check_out_dir(args.out)
    cfg = compose("iclr26_delivr.conf", "train", args.overrides)
    if int(cfg.threads) > 0:
        torch.set_num_threads(int(cfg.threads))
    mcfg, weights = model_config(cfg.model), loss_weights(cfg.get("loss"))
    if args.resume is not None and not (Path(args.resume) / "trainer_state.pt").is_file():
        raise UserError(
            f"--resume {args.resume!r} is not a training state (checkpoints/step-N from an earlier run)"
        )
    checkpoints = Path(args.checkpoints) if args.checkpoints else final.parent / f"{final.name}-checkpoints"
    device = pick_device(cfg.device)
    settings = settings_from(
        cfg.train,
        seed=int(cfg.seed),
        device=device,
        checkpoint_dir=str(checkpoints) if int(cfg.train.get("checkpoint_every", 0)) > 0 else None,
    )
    seqs = read_pairs(args.data)
    val_name = cfg.data.val
    if val_name is not None and val_name not in {s.name for s in seqs}:
        raise UserError(
            f"data.val={val_name!r} is not one of the sequences: {', '.join(s.name for s in seqs)}"
        )
    train_seqs = [s for s in seqs if s.name != val_name] or seqs
    val = next((s for s in seqs if s.name == val_name), None)

    def chw(a):
        return torch.from_numpy(a).permute(0, 3, 1, 2)

    videos = [(chw(s.rainy), chw(s.clean)) for s in train_seqs]
    crop = int(cfg.data.crop)
    sample = window_sampler(
        videos, mcfg.frames, settings.batch_size, crop, int(cfg.seed), bool(cfg.data.augment)
    )
    evaluate = None
    if val is not None:
        vr, vc = chw(val.rainy), chw(val.clean)
        clips = torch.stack([vr[idx] for idx in window_indices(len(vr), mcfg.frames)])

        def evaluate(m) -> float:
            return float(psnr_uint8(predict(m, clips, batch=1)[0], vc).mean())

    torch.manual_seed(int(cfg.seed))
    model = DeLiVR(mcfg).to(device)
    print(mcfg.describe())
    height = min(crop, max(int(r.shape[-2]) for r, _ in videos))
    width = min(crop, max(int(r.shape[-1]) for r, _ in videos))
    est = training_memory(
        mcfg, sum(p.numel() for p in model.parameters()), settings.batch_size, height, width
    )
    print(f"{est.describe()} (batch {settings.batch_size}, crop {height}x{width})")
    dtype = settings.autocast_dtype(torch.device(device).type)
    print(f"precision: {'bf16 autocast (Lie bias and loss in fp32)' if dtype else 'fp32'}")
    try:
        model, log = train_delivr(
            model, sample, settings, evaluate=evaluate, weights=weights, resume_from=args.resume
        )
    except CheckpointError as exc:
        raise UserError(str(exc)) from None
    metrics = {
        "final_loss": log.losses[-1] if log.losses else None,
        "val_psnr": log.evals[-1][1] if log.evals else None,
        "seconds": log.seconds,
        "sequences": [s.name for s in train_seqs],
        "val": val_name,
        "resumed_from": args.resume,
        "start_step": log.start,
        "frames_seen": (settings.steps - log.start) * settings.batch_size,
        "memory_estimate_bytes": est.total,
    }
    save(final, model, config=OmegaConf.to_container(cfg), metrics=metrics)
    atomic_write_text(final / "train_log.csv", _log_csv(log))
    print(f"trained steps {log.start + 1}-{settings.steps} in {log.seconds:.1f} s -> {final}")
    return 0
