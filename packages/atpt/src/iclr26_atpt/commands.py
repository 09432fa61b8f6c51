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


def tune_arms(args: argparse.Namespace) -> dict[str, tuple[str, float, int]]:
    """{arm name: (regulariser, λ, steps)}: the one configured arm, or with ``--sweep`` zero-shot, TPT and the
    regulariser at each λ of ``--lams`` on the same views (λ < 0 = the released atpt_classification.py sign)."""
    if not args.sweep:
        check_tta(args.views, args.selection, args.lam, args.allow_negative_lambda)
        name = "TPT" if args.regularizer == "none" else f"{args.regularizer} λ={args.lam:g}"
        return {name: (args.regularizer, float(args.lam), int(args.steps))}
    reg = "atpt" if args.regularizer == "none" else args.regularizer
    lams = [float(v) for v in args.lams]
    if not lams:
        raise AtptError("--lams needs at least one value")
    check_tta(args.views, args.selection, 0.0)
    arms = {"zero-shot": ("none", 0.0, 0), "TPT": ("none", 0.0, int(args.steps))}
    arms.update({f"{reg} λ={lam:g}": (reg, lam, int(args.steps)) for lam in lams})
    return arms


def tune(args: argparse.Namespace) -> int:
    import numpy as np
    from PIL import Image

    from iclr26_core.cli import progress

    from .calibration import accuracy, ece20, reliability_figure
    from .tuner import TestTimePromptTuner, tune_on_features

    arms = tune_arms(args)
    out = check_out_dir(args.out)
    names, items = scan_images(args.images, read_classes(args.classes))
    model, proc, tok = load_clip(args.model)
    tuner = TestTimePromptTuner(
        model,
        proc,
        names,
        tokenizer=tok,
        n_views=args.views,
        selection=args.selection,
        augment=args.augment,
        template=args.template,
        seed=args.seed,
        allow_negative_lambda=True,  # λ was checked by tune_arms
    )
    rows, probs, labels = [], {a: [] for a in arms}, []
    desc = "sweep" if args.sweep else next(iter(arms))
    for i, (path, label) in enumerate(progress(items, desc=f"{desc} TTA")):
        try:
            image = Image.open(path).convert("RGB")
        except OSError as exc:
            raise AtptError(f"cannot read image {str(path)!r} ({exc})") from exc
        feats = tuner.view_features(image, i)  # the views are shared by every arm
        for arm, (reg, lam, steps) in arms.items():
            p = tune_on_features(
                tuner.learner,
                feats,
                tuner.logit_scale,
                regularizer=reg,
                lam=lam,
                steps=steps,
                lr=args.lr,
                selection=args.selection,
            )
            rows.append(
                [
                    str(path),
                    arm,
                    names[int(p.probs.argmax())],
                    f"{float(p.probs.max()):.6f}",
                    f"{math.degrees(p.ad):.4f}",
                    "" if label is None else names[label],
                ]
            )
            if label is not None:
                probs[arm].append((p.probs.numpy(), math.degrees(p.ad)))
        if label is not None:
            labels.append(label)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["file", "arm", "prediction", "confidence", "ad_deg", "label"])
    w.writerows(rows)
    with staged_dir(out) as tmp:
        atomic_write_text(tmp / "predictions.csv", buf.getvalue())
        if labels:
            per_arm, figure_rows = {}, {}
            for arm, (reg, lam, steps) in arms.items():
                p = np.stack([v[0] for v in probs[arm]])
                per_arm[arm] = {
                    "regularizer": reg,
                    "lam": lam,
                    "steps": steps,
                    "objective": "released (+|λ|·AD)" if lam < 0 else "paper (−λ·AD)",
                    "accuracy": accuracy(p, labels),
                    "ece20": ece20(p, labels),
                    "ad_deg": float(np.mean([v[1] for v in probs[arm]])),
                    "confidence": 100.0 * float(p.max(-1).mean()),
                }
                figure_rows[arm] = (p, labels)
            metrics = {"n": len(labels), "views": args.views, "lr": args.lr, "template": args.template}
            metrics["arms"] = per_arm
            write_json(tmp / "metrics.json", metrics)
            from iclr26_core.report import save_figure

            save_figure(reliability_figure(figure_rows), tmp / "reliability.png")
            print(f"{len(labels)} labelled images")
            for arm, v in per_arm.items():
                print(
                    f"  {arm:>14}: accuracy {v['accuracy']:6.2f}  ECE-20 {v['ece20']:6.2f}  "
                    f"AD {v['ad_deg']:7.3f}°  confidence {v['confidence']:6.2f}"
                )
    print(f"wrote {out}")
    return 0


def dispersion(args: argparse.Namespace) -> int:
    import torch

    from .objectives import angular_diversity, atfd, min_pairwise_angle, orthogonality
    from .prompt import PromptLearner

    names = read_classes(args.classes)
    model, _, tok = load_clip(args.model)
    with torch.no_grad():
        t = PromptLearner(model, tok, names, template=args.template).text_features()
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
