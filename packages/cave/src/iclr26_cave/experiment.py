"""One seed of the miniature: render data, train CAVE (NOVUM + concepts) and the 2D baseline (CE + NMF concepts),
and measure accuracy (clean / occluded), prototype counts, 3D-C, localisation and the logit decomposition."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .baseline2d import Classifier2D, NMFConcepts
from .concepts import extract_concepts
from .consistency import consistency_3d, localisation
from .decision import cave_logits
from .maps import concept_maps
from .model import CaveModel
from .render import meshes, render_arrays
from .training import predict, train_ce, train_novum


def load_split(
    n: int, split: str, seed: int, size: int, occlusion: float = 0.0, occluder: str = "pool"
) -> dict[str, torch.Tensor]:
    arr = render_arrays(n, split, occlusion=occlusion, size=size, seed=seed, occluder=occluder)
    return {k: torch.from_numpy(np.asarray(v)) for k, v in arr.items()}


def cave_maps(model: CaveModel, images: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """CaveOutput of all images and their feature-level concept maps [N,T,H,W]."""
    with torch.no_grad():
        feats = predict(model.features, images)
        out = cave_logits(feats, model.bank(), num_classes=model.num_classes)
    return out, concept_maps(out, images.shape[-2:])


def class_consistency(maps_of_class, data, cfg) -> dict[str, float]:
    """3D-C pooled over classes: each class's concepts on its own mesh, pair-weighted over all concepts; the floor
    likewise. ``maps_of_class(y)`` -> attributions [N_y,T_y,H,W] of class y's test images."""
    num, den, fnum, fden, js = 0.0, 0, 0.0, 0, []
    verts = meshes()
    for y in sorted(verts):
        sel = data["label"] == y
        c = consistency_3d(
            maps_of_class(y, sel),
            data["pix_to_vertex"][sel],
            torch.as_tensor(verts[y]),
            top_fraction=cfg.metric.top_fraction,
            max_pairs=cfg.metric.max_pairs,
            sigma=cfg.metric.sigma,
            seed=y,
        )
        ok = c.pairs > 0
        num += float((c.per_concept.double()[ok] * c.pairs[ok]).sum())
        den += int(c.pairs.sum())
        if not math.isnan(c.floor):
            fnum, fden = fnum + c.floor * c.floor_pairs, fden + c.floor_pairs
        js.append(c)
    return {"score": num / max(den, 1), "floor": fnum / max(fden, 1), "pairs": den}


def per_class_mean(metric, maps_of_class, data, percentile: float) -> float:
    """The mean of ``metric(maps, part_masks, percentile)`` (a tensor, nan where undefined) over every class's
    images, the nan entries left out (nan when all are)."""
    vals = []
    for y in range(int(data["label"].max()) + 1):
        sel = data["label"] == y
        got = metric(maps_of_class(y, sel), data["part_mask"][sel], percentile)
        vals += [v for v in got.tolist() if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def class_localisation(maps_of_class, data, percentile: float) -> float:
    """`localisation` per concept of each class, averaged over the classes' active concepts."""
    return per_class_mean(localisation, maps_of_class, data, percentile)


def run_seed(cfg, seed: int, ctx) -> dict[str, Any]:
    torch.manual_seed(seed)
    d, size = cfg.data, cfg.data.size
    train = load_split(d.n_train, "train", seed, size)
    clean = load_split(d.n_test, "test", seed, size)
    occl = load_split(d.n_test, "test", seed, size, occlusion=d.occlusion)
    # diagnostic arm: occluder boxes of the same sizes filled with background noise instead of part textures
    plain = load_split(d.n_test, "test", seed, size, occlusion=d.occlusion, occluder="background")
    # --- CAVE: NOVUM training of Φ and the volumes, then concepts
    vertices = {y: torch.as_tensor(v, dtype=torch.float32) for y, v in meshes().items()}
    model = CaveModel.create(
        vertices, feature_dim=cfg.novum.feature_dim, seed=seed, distance=cfg.novum.distance
    )
    novum_losses = train_novum(
        model,
        train["image"],
        train["pix_to_vertex"],
        train["label"],
        steps=cfg.novum.steps,
        lr=cfg.novum.lr,
        batch_size=cfg.novum.batch_size,
        seed=seed,
        progress=ctx.progress,
    )
    bank = extract_concepts(
        model, cfg.concepts.n_concepts, cfg.concepts.method, cfg.concepts.min_visibility, seed=seed
    )
    res: dict[str, Any] = {"seed": seed, "novum_loss": [novum_losses[0], novum_losses[-1]]}
    ctx.log(f"seed {seed}: NOVUM loss {novum_losses[0]:.3f} -> {novum_losses[-1]:.3f}, {len(bank)} concepts")
    res["prototypes_cave"], res["prototypes_volume"] = len(bank), len(model.volume)
    with torch.no_grad():
        for name, data in (("clean", clean), ("occluded", occl), ("occluded_plain", plain)):
            out, _ = cave_maps(model, data["image"])
            res[f"acc_cave_{name}"] = float((out.logits.argmax(1) == data["label"]).float().mean())
            vm = predict(lambda x: model.classify(x, volume_matching=True).logits, data["image"])
            res[f"acc_volume_{name}"] = float((vm.argmax(1) == data["label"]).float().mean())
            if name == "clean":
                summed = torch.zeros_like(out.logits).index_add_(1, out.classes, out.contributions)
                res["decomposition_error"] = float((summed - out.logits).abs().max())
    # --- 2D baseline: CE classifier on the same data, NMF concepts on its maps
    torch.manual_seed(seed)
    clf = Classifier2D(model.num_classes)
    ce_losses = train_ce(
        clf,
        train["image"],
        train["label"],
        steps=cfg.ce.steps,
        lr=cfg.ce.lr,
        batch_size=cfg.ce.batch_size,
        seed=seed,
        progress=ctx.progress,
    )
    res["ce_loss"] = [ce_losses[0], ce_losses[-1]]
    ctx.log(f"seed {seed}: 2D CE loss {ce_losses[0]:.3f} -> {ce_losses[-1]:.3f}")
    for name, data in (("clean", clean), ("occluded", occl), ("occluded_plain", plain)):
        res[f"acc_2d_{name}"] = float((predict(clf, data["image"]).argmax(1) == data["label"]).float().mean())
    nmf = NMFConcepts(cfg.concepts.n_concepts, seed=seed).fit(
        predict(clf.feature_map, train["image"]), train["label"]
    )
    # --- explanations on clean + occluded test images, each class's concepts on its own images
    both = {k: torch.cat([clean[k], occl[k]]) for k in clean}
    out, maps = cave_maps(model, both["image"])
    fmap = predict(clf.feature_map, both["image"])
    up = torch.nn.functional.interpolate

    def cave_of(y, sel):
        return maps[sel][:, out.classes == y]

    def nmf_of(y, sel):
        return up(nmf.maps(fmap[sel], y), size=tuple(both["image"].shape[-2:]), mode="nearest")

    for name, fn in (("cave", cave_of), ("nmf", nmf_of)):
        c3 = class_consistency(fn, both, cfg)
        res[f"c3d_{name}"], res[f"c3d_floor_{name}"] = c3["score"], c3["floor"]
        res[f"loc_{name}"] = class_localisation(fn, both, cfg.metric.percentile)
    res["_model"], res["_clf"], res["_nmf"], res["_data"], res["_out"], res["_maps"] = (
        model,
        clf,
        nmf,
        both,
        out,
        maps,
    )
    return res
