"""The user-facing verbs ``train``, ``embed`` and ``profile`` (called by the CLI with parsed arguments)."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from iclr26_core.errors import UserError
from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json

from .userdata import read_counts, read_images, read_obs


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def train(args) -> int:
    import torch

    from .config import PetriConfig
    from .documents import shared_contexts
    from .likelihood import check_counts
    from .model import PetriModel
    from .training import channel_stats, train_petri

    final = check_out_dir(args.out)
    images = read_images(args.images)
    obs = read_obs(args.image_obs, [args.context_key], "image")
    if len(obs) != len(images):
        raise UserError(f"{args.image_obs} has {len(obs)} rows but the images hold {len(images)} cells")
    counts, eobs, kind = read_counts(args.expression, lognorm_ok=args.likelihood == "mse")
    if args.context_key not in eobs.columns:
        raise UserError(
            f"obs column {args.context_key!r} missing in {args.expression} (columns: {list(eobs.columns)})"
        )
    img_ctx, expr_ctx = (
        obs[args.context_key].astype(str).to_numpy(),
        eobs[args.context_key].astype(str).to_numpy(),
    )
    pairs = _pair_ids(args, obs, eobs)
    shared, dropped = shared_contexts(img_ctx, expr_ctx)
    if dropped["image_only"] or dropped["expression_only"]:
        _say(
            f"dropped contexts present in one modality only: {dropped['image_only']} image-only, "
            f"{dropped['expression_only']} expression-only; {len(shared)} shared"
        )
    if args.likelihood == "nb":
        check_counts(torch.as_tensor(counts))
    if kind == "lognorm":
        _say("expression X is not integer counts: used as log-normalised values (likelihood mse)")
    if images.shape[-1] != images.shape[-2]:
        raise UserError(f"images must be square, got {images.shape[-2]}x{images.shape[-1]}")
    mean, std = channel_stats(images)
    cfg = PetriConfig(
        n_channels=images.shape[1],
        image_size=images.shape[-1],
        patch_size=args.patch_size,
        n_genes=counts.shape[1],
        hidden_size=args.hidden_size,
        num_heads=args.num_heads,
        image_layers=args.image_layers,
        n_latents=args.n_latents,
        perceiver_rounds=args.perceiver_rounds,
        mst_layers=args.mst_layers,
        dec_depth=args.decoder_layers,
        mask_ratio=args.mask_ratio,
        likelihood=args.likelihood,
        expression_input=kind,
        image_mean=mean,
        image_std=std,
        pair_slots=args.cells_per_document if pairs else 0,
    )
    model = PetriModel(cfg)
    from iclr26_core.cli import progress

    log = train_petri(
        model,
        images,
        img_ctx,
        counts,
        expr_ctx,
        steps=args.steps,
        documents=args.documents,
        cells_per_document=args.cells_per_document,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup=args.warmup,
        permute=args.permute,
        seed=args.seed,
        progress=lambda it, total: progress(it, total=total, desc="train"),
        **pairs,
    )
    with staged_dir(final) as tmp:
        model.save_pretrained(tmp)
        atomic_write_text(tmp / "train_log.csv", pd.DataFrame(log).to_csv(index=False))
        keys = ("steps", "documents", "cells_per_document", "lr", "weight_decay", "warmup", "permute", "seed")
        write_json(tmp / "train_args.json", {k: getattr(args, k) for k in keys})
    _say(f"wrote {final} (final loss {log[-1]['loss']:.4f})")
    return 0


def _pair_ids(args, obs: pd.DataFrame, eobs: pd.DataFrame) -> dict:
    """``--pair-key`` (extension): the pair-id column of both obs tables as `train_petri` keywords; {} without."""
    key = getattr(args, "pair_key", None)
    if key is None:
        return {}
    for table, what in ((obs, args.image_obs), (eobs, args.expression)):
        if key not in table.columns:
            raise UserError(f"obs column {key!r} missing in {what} (columns: {list(table.columns)})")
    n = int(obs[key].notna().sum())
    _say(f"pair key {key!r}: {n} image cells carry a pair id")
    return dict(image_pair=obs[key].to_numpy(dtype=object), expression_pair=eobs[key].to_numpy(dtype=object))


def _load_model(path: str):
    from pathlib import Path

    from iclr26_core.errors import CheckpointError

    from .model import PetriModel

    if not (Path(path) / "config.json").is_file():
        raise CheckpointError(f"not a PETRI checkpoint directory: {path}")
    try:
        return PetriModel.from_pretrained(path).eval()
    except Exception as exc:  # corrupt weights
        raise CheckpointError(f"cannot load the checkpoint {path}: {exc}") from None


def embed(args) -> int:
    from pathlib import Path

    from .embedding import embed as embed_fn

    model = _load_model(args.model)
    out = Path(args.out)
    if out.exists():
        raise UserError(f"{out} exists; give a new file")
    if args.images:
        x = read_images(args.images)
        if x.shape[1:] != (model.config.n_channels, model.config.image_size, model.config.image_size):
            raise UserError(
                f"images have shape {x.shape[1:]}, the model expects "
                f"{(model.config.n_channels, model.config.image_size, model.config.image_size)}"
            )
        ids = _image_ids(args, len(x))
        emb = embed_fn(model, images=x)
    else:
        counts, eobs, kind = read_counts(args.expression, lognorm_ok=True)
        if kind != model.config.expression_input:
            raise UserError(
                f"{args.expression} holds {kind} values but the model was trained on "
                f"{model.config.expression_input}"
            )
        if counts.shape[1] != model.config.n_genes:
            raise UserError(f"{counts.shape[1]} genes, the model expects {model.config.n_genes}")
        emb, ids = embed_fn(model, counts=counts), eobs["cell_id"].to_numpy(dtype=str)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(tmp, embeddings=emb.numpy(), cell_id=ids)
    tmp.replace(out)
    _say(f"wrote {out} ({emb.shape[0]} x {emb.shape[1]})")
    return 0


def _image_ids(args, n: int) -> np.ndarray:
    """The image cells' ids: column ``--id-key`` of ``--image-obs``; row numbers (said once) without it."""
    if not args.image_obs:
        _say("no --image-obs: the cell ids written are row numbers")
        return np.arange(n).astype(str)
    obs = read_obs(args.image_obs, [args.id_key], "image")
    if len(obs) != n:
        raise UserError(f"{args.image_obs} has {len(obs)} rows but the images hold {n} cells")
    return obs[args.id_key].to_numpy(dtype=str)


def profile(args) -> int:
    from pathlib import Path

    from .metrics import guide_consistency, relationship_recall
    from .profiles import perturbation_profiles

    final = check_out_dir(args.out)
    emb = {}
    for m, npz, csv in zip(("image", "expression"), args.embeddings, args.obs, strict=True):
        if not Path(npz).is_file():
            raise UserError(f"embeddings not found: {npz}")
        x = np.load(npz, allow_pickle=False)["embeddings"]
        obs = read_obs(csv, [args.context_key, args.gene_key, args.batch_key], m)
        if len(obs) != len(x):
            raise UserError(f"{csv} has {len(obs)} rows but {npz} holds {len(x)} embeddings")
        emb[m] = (x, obs)
    prof = perturbation_profiles(
        emb,
        context_key=args.context_key,
        control_value=args.control_value,
        batch_key=args.batch_key,
        gene_key=args.gene_key,
    )
    gene_of = {}
    for _, obs in emb.values():
        src = obs[args.gene_key] if args.gene_key else obs[args.context_key]
        gene_of.update(dict(zip(obs[args.context_key].astype(str), src.astype(str), strict=True)))
    metrics = {}
    guides = {**prof.per_modality, "multimodal": prof.multimodal}
    positives = None
    if args.positives:
        if not Path(args.positives).is_file():
            raise UserError(f"positives file not found: {args.positives}")
        pairs = pd.read_csv(args.positives)
        positives = list(zip(pairs.iloc[:, 0].astype(str), pairs.iloc[:, 1].astype(str), strict=True))
    for m, g in guides.items():
        metrics[m] = {"gc_fraction": guide_consistency(g, gene_of, controls=[args.control_value]).fraction}
        if positives:
            r = relationship_recall(prof.genes[m], positives)
            metrics[m].update(tpr_at_5pct_fpr=r.tpr, auc=r.auc)
    if args.gene_key is None and any(np.isnan(v["gc_fraction"]) for v in metrics.values()):
        metrics["note"] = (
            "gc_fraction is nan: without --gene-key every context is its own gene, and guide consistency needs "
            "genes with >= 2 guides (give --gene-key)"
        )
        _say(metrics["note"])
    with staged_dir(final) as tmp:
        for m, g in guides.items():
            atomic_write_text(tmp / f"profiles_{m}.csv", g.to_csv())
        write_json(tmp / "metrics.json", metrics)
    _say(f"wrote {final}: " + "; ".join(f"{m} GC {metrics[m]['gc_fraction']:.3f}" for m in guides))
    return 0
