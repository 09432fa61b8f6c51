"""The user-facing verbs: ``train``, ``segment``, ``fps`` (alias ``speed``). Inputs are checked before anything
is written; outputs go to a staged directory that appears only when the command succeeds."""

from __future__ import annotations

import argparse
import csv
import io
from dataclasses import asdict
from pathlib import Path

import numpy as np

from iclr26_core.errors import UserError


def _load(path: str):
    """An EoMT/QPrompt or Mask2Former model from a directory or hub id, or ``tiny-qprompt``/``tiny-mask2former``."""
    if path == "tiny-qprompt":
        from .model import build_qprompt

        return build_qprompt(5)
    if path == "tiny-mask2former":
        from .model import tiny_mask2former

        return tiny_mask2former(5)
    from iclr26_core.models import load_model

    model = load_model(path, auto_class="AutoModelForUniversalSegmentation")
    return model.eval()


def _image_size(model) -> int | None:
    return getattr(model.config, "image_size", None) if type(model).__name__.startswith("Eomt") else None


def split_validation(images: np.ndarray, labels: np.ndarray, fraction: float, seed: int):
    """((train images, labels), (val images, labels) or None): a seeded random ``fraction`` held out."""
    if not 0 <= fraction < 1:
        raise UserError(f"--val-fraction must be in [0, 1), got {fraction}")
    n_val = round(fraction * len(images))
    if fraction > 0 and n_val == 0:
        n_val = 1
    if n_val == 0:
        return (images, labels), None
    if n_val >= len(images):
        raise UserError(f"--val-fraction {fraction} leaves no training image out of {len(images)}")
    order = np.random.default_rng(seed).permutation(len(images))
    val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
    return (images[train], labels[train]), (images[val], labels[val])


def train_cmd(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from iclr26_core.configs import compose
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .config import GRQAConfig
    from .folders import read_dataset
    from .inference import evaluate
    from .model import build_qprompt
    from .train import SegTrainConfig, train_segmenter

    cfg = compose("iclr26_qprompt.conf", "train", args.overrides)
    final = check_out_dir(args.out)
    _names, images, labels = read_dataset(args.data, args.num_classes)
    (images, labels), val = split_validation(images, labels, args.val_fraction, int(cfg.seed))
    h, w = images.shape[1:3]
    if h != w:
        raise UserError(f"images must be square (EoMT's image_size), got {h}x{w}")
    m = cfg.model
    model = build_qprompt(
        args.num_classes,
        backbone=args.model,
        num_queries=int(m.num_queries),
        num_blocks=int(m.num_blocks),
        mask_annealing=bool(m.mask_annealing),
        seed=int(cfg.seed),
        image_size=h,
        **({} if args.model else {"patch_size": int(m.patch_size)}),
    )
    grqa = None if args.no_grqa else GRQAConfig(**OmegaConf.to_container(cfg.grqa))
    t = cfg.train
    tc = SegTrainConfig(
        steps=int(t.steps),
        batch_size=int(t.batch_size),
        lr=float(t.lr),
        seed=int(cfg.seed),
        desc="train",
        eval_every=int(t.eval_every) if val is not None else 0,
    )
    eval_fn = None if val is None else (lambda m: evaluate(m, *val, args.num_classes)["miou"])
    model, result = train_segmenter(model, images, labels, tc, grqa, eval_fn=eval_fn)
    scores = evaluate(model, images, labels, args.num_classes)
    with staged_dir(final) as tmp:
        model.save_pretrained(tmp)
        log = io.StringIO()
        writer = csv.writer(log)
        writer.writerow(["step", "loss"])
        writer.writerows((i + 1, f"{loss:.6f}") for i, loss in enumerate(result.losses))
        (tmp / "train_log.csv").write_text(log.getvalue())
        write_json(
            tmp / "metrics.json",
            {
                "train_miou": scores["miou"],
                "train_iou": scores["iou"],
                "val_miou": result.final_eval,
                "val_curve": [[step, value] for step, value in result.evals],
                "n_train": len(images),
                "n_val": 0 if val is None else len(val[0]),
                "final_loss": float(np.mean(result.losses[-10:])),
                "steps": result.steps,
                "grqa": None if grqa is None else asdict(grqa),
                "config": OmegaConf.to_container(cfg),
            },
        )
    held = "" if val is None else f", held-out validation mIoU {result.final_eval:.4f} ({len(val[0])} images)"
    print(
        f"trained {result.steps} steps (grqa={'off' if grqa is None else 'on'}); training-set mIoU "
        f"{scores['miou']:.4f}{held} -> {final}"
    )
    return 0


def segment_cmd(args: argparse.Namespace) -> int:
    from PIL import Image

    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .data import to_pixel_values
    from .folders import palette, read_images, read_labels
    from .inference import confusion_matrix, iou_per_class, miou, predict

    final = check_out_dir(args.out)
    model = _load(args.model)
    names, images = read_images(args.images)
    size = _image_size(model)
    if size is not None and images.shape[1:3] != (size, size):
        raise UserError(f"images are {images.shape[1]}x{images.shape[2]} but the model takes {size}x{size}")
    num_classes = int(model.config.num_labels)
    labels = read_labels(args.labels, names, num_classes, images.shape[1:3]) if args.labels else None
    pred = predict(model, to_pixel_values(images)).numpy().astype(np.uint8)
    colours = palette(num_classes)
    with staged_dir(final) as tmp:
        (tmp / "labels").mkdir()
        (tmp / "overlays").mkdir()
        for name, img, p in zip(names, images, pred, strict=True):
            Image.fromarray(p).save(tmp / "labels" / name)
            overlay = (0.5 * img + 0.5 * colours[p]).astype(np.uint8)
            Image.fromarray(overlay).save(tmp / "overlays" / name)
        if labels is not None:
            conf = confusion_matrix(pred, labels, num_classes)
            write_json(
                tmp / "metrics.json",
                {
                    "miou": miou(conf),
                    "iou": iou_per_class(conf).tolist(),
                    "images": len(names),
                    "ignore_index": 255,
                },
            )
    line = f"segmented {len(names)} images -> {final}"
    if labels is not None:
        line += f" (mIoU {miou(confusion_matrix(pred, labels, num_classes)):.4f})"
    print(line)
    return 0


def fps_cmd(args: argparse.Namespace) -> int:
    from iclr26_core.fs import check_out_dir, staged_dir, write_json

    from .speed import measure_fps

    final = check_out_dir(args.out) if args.out else None
    model = _load(args.model)
    size = _image_size(model)
    if args.size:
        try:
            h, w = (int(v) for v in args.size.lower().split("x"))
        except ValueError:
            raise UserError(f"--size {args.size!r} is not HxW (e.g. 64x64)") from None
        if size is not None and (h, w) != (size, size):
            raise UserError(f"--size {h}x{w}: this EoMT model takes {size}x{size} images (its image_size)")
    elif size is not None:
        h = w = size
    else:
        raise UserError("--size HxW is needed for a model without a fixed image size")
    if args.batch < 1 or args.iters < 1:
        raise UserError("--batch and --iters must be at least 1")
    report = measure_fps(model, (h, w), batch_size=args.batch, iters=args.iters)
    print(
        f"{report.fps:.1f} FPS ({report.ms_median:.2f} ms median, IQR {report.ms_iqr:.2f} ms) · batch "
        f"{report.batch_size} · {report.dtype} · {report.device} · {report.threads} threads · timed: {report.timed}"
    )
    if final is not None:
        with staged_dir(final) as tmp:
            write_json(tmp / "fps.json", asdict(report))
        print(f"-> {Path(final) / 'fps.json'}")
    return 0
