"""The user-facing verbs: ``train`` (NOVUM + concepts on the user's .npz shards), ``explain`` (concept maps of a
saved model for the user's images) and ``consistency`` (3D-C of any method's maps). Every output folder is staged
and renamed into place only when complete; a user's mistake is one `UserError` line."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_core.errors import UserError
from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json

TRAIN_DEFAULTS: dict[str, Any] = dict(
    steps=400, lr=1e-3, batch_size=32, feature_dim=32, n_concepts=8, min_visibility=0.1, distance=4.0, seed=0
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def _overrides(pairs: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or key not in defaults:
            raise UserError(f"unknown override {pair!r}; known keys: {', '.join(defaults)}")
        try:
            out[key] = int(float(value)) if isinstance(defaults[key], int) else float(value)
        except ValueError:
            raise UserError(f"override {key} must be a number, got {value!r}") from None
    return out


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None


def load_shards(folder: str | Path) -> dict[str, Any]:
    """Concatenate the .npz shards of ``folder`` and check them (shapes, vertex ids, labels, classes)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"data folder {str(folder)!r} does not exist")
    shards = sorted(folder.glob("*.npz"))
    if not shards:
        raise UserError(f"no .npz shards in {str(folder)!r}")
    parts = [_load_npz(p) for p in shards]
    for p, z in zip(shards, parts, strict=True):
        missing = [k for k in ("images", "labels", "pix_to_vertex") if k not in z]
        if missing:
            raise UserError(f"{p.name} lacks {', '.join(missing)}")
    images = np.concatenate([z["images"] for z in parts]).astype(np.float32)
    labels = np.concatenate([z["labels"] for z in parts]).astype(np.int64)
    p2v = np.concatenate([z["pix_to_vertex"] for z in parts]).astype(np.int64)
    vertices = {}
    for z in parts:
        for k, v in z.items():
            if k.startswith("vertices_"):
                vertices[int(k.removeprefix("vertices_"))] = v.astype(np.float32)
    if images.ndim != 4 or images.shape[1] != 3:
        raise UserError(f"images must be [n,3,H,W], got shape {images.shape}")
    if p2v.shape != (images.shape[0], *images.shape[2:]):
        raise UserError(
            f"pix_to_vertex has shape {p2v.shape}, expected {(images.shape[0], *images.shape[2:])}"
        )
    if not vertices:
        raise UserError("no vertices_<class> arrays in the shards")
    n_cls = max(vertices) + 1
    if sorted(vertices) != list(range(n_cls)):
        raise UserError(f"vertices_<class> must cover classes 0..{n_cls - 1}, got {sorted(vertices)}")
    if labels.min() < 0 or labels.max() >= n_cls:
        raise UserError(
            f"labels must lie in 0..{n_cls - 1} (one mesh per class), got {labels.min()}..{labels.max()}"
        )
    for y in range(n_cls):
        if not (labels == y).any():
            raise UserError(f"class {y} has no training images (an empty class)")
        if len(vertices[y]) == 0:
            raise UserError(f"class {y} has an empty mesh (0 vertices)")
        top = p2v[labels == y].max()
        if top >= len(vertices[y]):
            raise UserError(f"pix_to_vertex holds vertex id {top} >= V={len(vertices[y])} of class {y}")
    return {"images": images, "labels": labels, "pix_to_vertex": p2v, "vertices": vertices}


def train(args: argparse.Namespace) -> int:
    import torch

    from .concepts import extract_concepts
    from .model import CaveModel
    from .training import train_novum

    opts = _overrides(args.overrides, TRAIN_DEFAULTS)
    final = check_out_dir(args.out)
    data = load_shards(args.data)
    vertices = {y: torch.from_numpy(v) for y, v in data["vertices"].items()}
    model = CaveModel.create(
        vertices,
        backbone=args.backbone,
        feature_dim=opts["feature_dim"],
        seed=opts["seed"],
        distance=opts["distance"],
    )
    model.config.image_size = list(data["images"].shape[-2:])
    log: list[dict] = []
    from iclr26_core.cli import progress

    train_novum(
        model,
        torch.from_numpy(data["images"]),
        torch.from_numpy(data["pix_to_vertex"]),
        torch.from_numpy(data["labels"]),
        steps=opts["steps"],
        lr=opts["lr"],
        batch_size=opts["batch_size"],
        seed=opts["seed"],
        progress=progress,
        log=log,
    )
    bank = extract_concepts(
        model, opts["n_concepts"], min_visibility=opts["min_visibility"], seed=opts["seed"]
    )
    with staged_dir(final) as tmp:
        model.save_pretrained(tmp)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["step", "loss"])
        writer.writeheader()
        writer.writerows(log)
        atomic_write_text(tmp / "train_log.csv", buf.getvalue())
    print(
        f"trained on {len(data['labels'])} images: {len(bank)} concepts over {model.num_classes} classes -> {final}"
    )
    return 0


def load_model(folder: str | Path):
    from .model import CaveModel

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise UserError(f"model folder {str(folder)!r} does not exist or holds no config.json")
    try:
        model = CaveModel.from_pretrained(folder)
    except (OSError, ValueError, RuntimeError) as exc:
        raise UserError(
            f"cannot load a CAVE model from {str(folder)!r}: {str(exc).splitlines()[0]}"
        ) from None
    return model.eval()


def load_images(folder: str | Path, size: tuple[int, int]) -> tuple[list[str], Any]:
    """Images of ``folder`` (PNG/JPEG, resized to ``size``) or one .npz with ``images`` [n,3,H,W]."""
    import torch

    folder = Path(folder)
    if folder.suffix == ".npz" and folder.is_file():
        arr = _load_npz(folder).get("images")
        if arr is None or arr.ndim != 4 or arr.shape[1] != 3:
            raise UserError(f"{folder.name} must hold images [n,3,H,W]")
        return [f"{folder.stem}_{i}" for i in range(len(arr))], torch.from_numpy(arr.astype(np.float32))
    if not folder.is_dir():
        raise UserError(f"images folder {str(folder)!r} does not exist")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise UserError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {str(folder)!r}")
    from PIL import Image, UnidentifiedImageError

    out = []
    for p in files:
        try:
            img = Image.open(p).convert("RGB").resize((size[1], size[0]), Image.BILINEAR)
        except (UnidentifiedImageError, OSError):
            raise UserError(f"cannot read image {p.name}") from None
        out.append(torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1))
    return [p.stem for p in files], torch.stack(out)


def explain(args: argparse.Namespace) -> int:
    import torch

    from .figures import overlay
    from .maps import concept_maps

    if args.top < 1:
        raise UserError(f"--top must be >= 1, got {args.top}")
    final = check_out_dir(args.out)
    model = load_model(args.model)
    size = tuple(getattr(model.config, "image_size", None) or (32, 32))
    names, images = load_images(args.images, size)
    with torch.no_grad():
        out = model.classify(images)
    maps = concept_maps(out, images.shape[-2:], method=args.method, model=model, images=images)
    rows = []
    with staged_dir(final) as tmp:
        for i, name in enumerate(names):
            pred = int(out.logits[i].argmax())
            own = (out.classes == pred).nonzero()[:, 0]
            top = own[out.contributions[i, own].argsort(descending=True)[: args.top]].tolist()
            overlay(images[i], maps[i, top], [f"concept {t}" for t in top], tmp / f"{name}_concepts.png")
            summed = [float(out.contributions[i, out.classes == y].sum()) for y in range(model.num_classes)]
            rows.append(
                {
                    "image": name,
                    "predicted": pred,
                    "logits": out.logits[i].tolist(),
                    "sum_of_contributions": summed,
                    "top_concepts": top,
                    "contributions": {
                        str(t): {"class": int(out.classes[t]), "value": float(out.contributions[i, t])}
                        for t in range(len(out.classes))
                    },
                }
            )
            if args.method == "lrp":  # Σ input relevance per concept (≈ its contribution; biases absorb some)
                rows[-1]["input_relevance"] = {
                    str(t): float(maps[i, t].sum()) for t in range(len(out.classes))
                }
        write_json(tmp / "contributions.json", rows)
    print(f"explained {len(names)} images -> {final}")
    return 0


def consistency(args: argparse.Namespace) -> int:
    import torch

    from .consistency import consistency_3d

    final = check_out_dir(args.out)
    a = _load_npz(Path(args.attributions))
    g = _load_npz(Path(args.geometry))
    if "attributions" not in a:
        raise UserError(f"{args.attributions} lacks 'attributions'")
    missing = [k for k in ("pix_to_vertex", "vertices") if k not in g]
    if missing:
        raise UserError(f"{args.geometry} lacks {', '.join(missing)}")
    c = consistency_3d(
        torch.from_numpy(a["attributions"].astype(np.float32)),
        torch.from_numpy(g["pix_to_vertex"].astype(np.int64)),
        torch.from_numpy(g["vertices"].astype(np.float32)),
        top_fraction=args.top_fraction,
        sigma=args.sigma,
        measure=args.measure,
    )
    with staged_dir(final) as tmp:
        write_json(
            tmp / "consistency.json",
            {
                "score": c.score,
                "floor": c.floor,
                "per_concept": c.per_concept.tolist(),
                "pairs": c.pairs.tolist(),
            },
        )
    print(json.dumps({"score": round(c.score, 4), "floor": round(c.floor, 4)}))
    return 0
