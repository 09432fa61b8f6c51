"""The user verbs: `tune` (TTA of a user's CLIP on an image folder) and `dispersion` (prompt geometry)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from pathlib import Path

from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json

from .validate import AtptError, check_class_names, check_tta

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


def read_classes(path: str | None) -> list[str] | None:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise AtptError(f"no class file at {path!r}")
    names = [line.strip() for line in p.read_text().splitlines() if line.strip()]
    check_class_names(names)
    return names


def scan_images(root: str, classes: list[str] | None) -> tuple[list[str], list[tuple[Path, int | None]]]:
    """(class names, [(file, label or None)]) of ``DIR/<class>/*`` or a flat ``DIR`` with ``--classes``."""
    r = Path(root)
    if not r.is_dir():
        raise AtptError(f"no image folder at {root!r}")
    subdirs = sorted(d for d in r.iterdir() if d.is_dir() and not d.name.startswith("."))
    if subdirs:
        names = [d.name for d in subdirs]
        if classes is not None:
            extra = sorted(set(names) - set(classes))
            if extra:
                raise AtptError(f"class folders not in --classes: {', '.join(extra)}")
            names = classes
        items = [
            (f, names.index(d.name))
            for d in subdirs
            for f in sorted(d.iterdir())
            if f.suffix.lower() in IMAGE_SUFFIXES
        ]
    else:
        if classes is None:
            raise AtptError(f"{root!r} has no class subfolders; pass --classes FILE for a flat folder")
        names = classes
        items = [(f, None) for f in sorted(r.iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES]
    check_class_names(names)
    if not items:
        raise AtptError(f"no images under {root!r}")
    return names, items


def load_clip(name_or_path: str):
    """(CLIPModel, image processor, tokenizer) from one folder or hub id."""
    from transformers import AutoImageProcessor

    from iclr26_core.models import load_model, load_tokenizer

    model = load_model(name_or_path, "CLIPModel").eval()
    tok = load_tokenizer(name_or_path)
    try:
        proc = AutoImageProcessor.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        raise AtptError(
            f"no image processor config at {name_or_path!r} ({str(exc).splitlines()[0]})"
        ) from exc
    return model, proc, tok


def tune(args: argparse.Namespace) -> int:
    import numpy as np
    from PIL import Image

    from iclr26_core.cli import progress

    from .calibration import accuracy, ece20, reliability_figure
    from .tuner import TestTimePromptTuner

    check_tta(args.views, args.selection, args.lam, args.allow_negative_lambda)
    out = check_out_dir(args.out)
    names, items = scan_images(args.images, read_classes(args.classes))
    model, proc, tok = load_clip(args.model)
    tuner = TestTimePromptTuner(
        model,
        proc,
        names,
        tokenizer=tok,
        regularizer=args.regularizer,
        lam=args.lam,
        steps=args.steps,
        lr=args.lr,
        n_views=args.views,
        selection=args.selection,
        augment=args.augment,
        ctx_init=args.ctx,
        seed=args.seed,
        allow_negative_lambda=args.allow_negative_lambda,
        n_ctx=len(tok(args.ctx, add_special_tokens=False)["input_ids"]),
    )
    rows, probs, labels = [], [], []
    for i, (path, label) in enumerate(progress(items, desc=f"{args.regularizer} TTA")):
        try:
            image = Image.open(path).convert("RGB")
        except OSError as exc:
            raise AtptError(f"cannot read image {str(path)!r} ({exc})") from exc
        p = tuner.predict(image, i)
        pred = int(p.probs.argmax())
        rows.append(
            [
                str(path),
                names[pred],
                f"{float(p.probs.max()):.6f}",
                f"{math.degrees(p.ad):.4f}",
                "" if label is None else names[label],
            ]
        )
        if label is not None:
            probs.append(p.probs.numpy())
            labels.append(label)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["file", "prediction", "confidence", "ad_deg", "label"])
    w.writerows(rows)
    with staged_dir(out) as tmp:
        atomic_write_text(tmp / "predictions.csv", buf.getvalue())
        if labels:
            probs = np.stack(probs)
            metrics = {
                "n": len(labels),
                "accuracy": accuracy(probs, labels),
                "ece20": ece20(probs, labels),
                "regularizer": args.regularizer,
                "lam": args.lam,
                "views": args.views,
                "lr": args.lr,
            }
            write_json(tmp / "metrics.json", metrics)
            from iclr26_core.report import save_figure

            save_figure(reliability_figure({args.regularizer: (probs, labels)}), tmp / "reliability.png")
            print(f"{len(labels)} images: accuracy {metrics['accuracy']:.2f}, ECE-20 {metrics['ece20']:.2f}")
    print(f"wrote {out}")
    return 0


def dispersion(args: argparse.Namespace) -> int:
    import torch

    from .objectives import angular_diversity, atfd, min_pairwise_angle, orthogonality
    from .prompt import PromptLearner

    names = read_classes(args.classes)
    model, _, tok = load_clip(args.model)
    n_ctx = len(tok(args.ctx, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        t = PromptLearner(model, tok, names, n_ctx=n_ctx, ctx_init=args.ctx).text_features()
        res = {
            "n_classes": len(names),
            "ad_deg": math.degrees(float(angular_diversity(t))),
            "min_angle_deg": math.degrees(float(min_pairwise_angle(t))),
            "atfd": float(atfd(t)),
            "orthogonality": float(orthogonality(t)),
        }
    for k, v in res.items():
        print(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}")
    if args.out:
        if Path(args.out).exists():
            raise AtptError(f"{args.out!r} exists; choose a new file")
        atomic_write_text(Path(args.out), json.dumps(res, indent=2) + "\n")
    return 0


def sphere(args: argparse.Namespace) -> int:
    from .sphere import sphere_experiment

    if args.n < 2 or args.d < 1 or args.steps < 0:
        raise AtptError(f"need --n >= 2, --d >= 1, --steps >= 0 (got {args.n}, {args.d}, {args.steps})")
    regs = ["atpt", "ctpt", "otpt"] if args.regularizer == "all" else [args.regularizer]
    for reg in regs:
        r = sphere_experiment(args.n, args.d, reg, steps=args.steps, lr=args.lr, seed=args.seed)
        print(
            f"{reg}: min angle {r.min_angle_deg:.2f} deg, mean nearest-neighbour angle {r.mean_nn_angle_deg:.2f} deg"
        )
    return 0
