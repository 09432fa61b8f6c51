"""One seed of the miniature: render data, train CAVE (NOVUM + concepts) and the 2D baseline (CE + NMF concepts),
and measure accuracy (clean and under four occluder kinds), prototype counts, 3D-C, localisation and the logit
decomposition. CAVE and volume matching classify over Ω = the object box (the official ``mask_out_padded``;
``eval.region=all``: every pixel), the other Ω is measured as an arm."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .baseline2d import Classifier2D, NMFConcepts
from .concepts import extract_concepts
from .consistency import consistency_3d, localisation
from .decision import box_region, cave_logits
from .maps import concept_maps
from .model import CaveModel
from .render import OCCLUDERS, meshes, occlude_arrays, render_arrays
from .training import predict, train_ce, train_novum

HEADLINE_OCCLUDERS = ("novel", "background", "grey")  # C2's headline (pre-registered); "pool": the stress arm


def _torch(arr: dict) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.asarray(v)) for k, v in arr.items()}


def load_split(
    n: int, split: str, seed: int, size: int, occlusion: float = 0.0, occluder: str = "pool"
) -> dict[str, torch.Tensor]:
    return _torch(render_arrays(n, split, occlusion=occlusion, size=size, seed=seed, occluder=occluder))


def test_sets(cfg, seed: int) -> dict[str, dict[str, torch.Tensor]]:
    """The clean test renders and, on the same objects and rectangles, one occluded set per occluder kind."""
    d = cfg.data
    clean = render_arrays(d.n_test, "test", size=d.size, seed=seed)
    sets = {"clean": _torch(clean)}
    for kind in OCCLUDERS:
        sets[f"occ_{kind}"] = _torch(occlude_arrays(clean, d.occlusion, "test", seed, kind))
    return sets


def region_of(data: dict[str, torch.Tensor], feature_size: tuple[int, int], region: str):
    """Ω for these images: ``"box"`` (the object box on the feature grid) or ``"all"`` (None: every pixel)."""
    if region == "all":
        return None
    if region != "box":
        raise ValueError(f"eval.region must be 'box' or 'all', got {region!r}")
    return box_region(data["box"], tuple(data["image"].shape[-2:]), feature_size)


def cave_maps(
    model: CaveModel, data: dict[str, torch.Tensor], region: str = "box"
) -> tuple[Any, torch.Tensor]:
    """CaveOutput of all images over Ω (``region``) and their feature-level concept maps [N,T,H,W]."""
    with torch.no_grad():
        feats = predict(model.features, data["image"])
        omega = region_of(data, tuple(feats.shape[-2:]), region)
        out = cave_logits(feats, model.bank(), omega, num_classes=model.num_classes)
    return out, concept_maps(out, data["image"].shape[-2:])


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


def per_class_mean(metric, maps_of_class, data, percentile: float, threshold: str = "official") -> float:
    """The mean of ``metric(maps, part_masks, percentile, threshold)`` (a tensor, nan where undefined) over every
    class's images, the nan entries left out (nan when all are)."""
    vals = []
    for y in range(int(data["label"].max()) + 1):
        sel = data["label"] == y
        got = metric(maps_of_class(y, sel), data["part_mask"][sel], percentile, threshold)
        vals += [v for v in got.tolist() if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def class_localisation(maps_of_class, data, percentile: float, threshold: str = "official") -> float:
    """`localisation` per concept of each class, averaged over the classes' active concepts."""
    return per_class_mean(localisation, maps_of_class, data, percentile, threshold)


def train_cave(cfg, seed: int, train: dict[str, torch.Tensor], ctx) -> tuple[CaveModel, list[float]]:
    """NOVUM training of Φ and the volumes with the run's settings (official clutter/regulariser by default)."""
    n = cfg.novum
    vertices = {y: torch.as_tensor(v, dtype=torch.float32) for y, v in meshes().items()}
    model = CaveModel.create(
        vertices,
        feature_dim=n.feature_dim,
        seed=seed,
        distance=n.distance,
        clutter_mode=n.clutter,
        max_group=n.max_group,
        reg_weight=n.reg_weight,
        volume_mean=n.volume_mean,
    )
    losses = train_novum(
        model,
        train["image"],
        train["pix_to_vertex"],
        train["label"],
        steps=n.steps,
        lr=n.lr,
        batch_size=n.batch_size,
        seed=seed,
        progress=ctx.progress,
    )
    return model, losses


def classify_sets(model: CaveModel, sets: dict, region: str, res: dict) -> None:
    """Accuracy of CAVE and volume matching over the headline Ω (``acc_cave_*``, ``acc_volume_*``) and of CAVE over
    the other Ω (``acc_cave_arm_*``) on every test set; the decomposition error on the clean set."""
    other = "all" if region == "box" else "box"
    bank, vm_bank = model.bank(), model.bank(volume_matching=True)
    with torch.no_grad():
        for name, data in sets.items():
            feats = predict(model.features, data["image"])
            grid = tuple(feats.shape[-2:])
            omega = region_of(data, grid, region)
            out = cave_logits(feats, bank, omega, num_classes=model.num_classes)
            res[f"acc_cave_{name}"] = float((out.logits.argmax(1) == data["label"]).float().mean())
            arm = cave_logits(feats, bank, region_of(data, grid, other), num_classes=model.num_classes)
            res[f"acc_cave_arm_{name}"] = float((arm.logits.argmax(1) == data["label"]).float().mean())
            vm = torch.cat(
                [
                    cave_logits(
                        feats[i : i + 100], vm_bank, None if omega is None else omega[i : i + 100]
                    ).logits
                    for i in range(0, len(feats), 100)
                ]
            )
            res[f"acc_volume_{name}"] = float((vm.argmax(1) == data["label"]).float().mean())
            if name == "clean":
                summed = torch.zeros_like(out.logits).index_add_(1, out.classes, out.contributions)
                res["decomposition_error"] = float((summed - out.logits).abs().max())


def run_seed(cfg, seed: int, ctx) -> dict[str, Any]:
    torch.manual_seed(seed)
    d, region = cfg.data, cfg.eval.region
    train = load_split(d.n_train, "train", seed, d.size)
    sets = test_sets(cfg, seed)
    # --- CAVE: NOVUM training of Φ and the volumes, then concepts
    model, novum_losses = train_cave(cfg, seed, train, ctx)
    bank = extract_concepts(
        model, cfg.concepts.n_concepts, cfg.concepts.method, cfg.concepts.min_visibility, seed=seed
    )
    res: dict[str, Any] = {"seed": seed, "novum_loss": [novum_losses[0], novum_losses[-1]]}
    ctx.log(f"seed {seed}: NOVUM loss {novum_losses[0]:.3f} -> {novum_losses[-1]:.3f}, {len(bank)} concepts")
    res["prototypes_cave"], res["prototypes_volume"] = len(bank), len(model.volume)
    classify_sets(model, sets, region, res)
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
    for name, data in sets.items():
        res[f"acc_2d_{name}"] = float((predict(clf, data["image"]).argmax(1) == data["label"]).float().mean())
    nmf = NMFConcepts(cfg.concepts.n_concepts, seed=seed).fit(
        predict(clf.feature_map, train["image"]), train["label"]
    )
    # --- explanations on clean + occluded (the first headline occluder) test images, each class's concepts on its
    # own images
    occ = sets[f"occ_{HEADLINE_OCCLUDERS[0]}"]
    both = {k: torch.cat([sets["clean"][k], occ[k]]) for k in occ}
    out, maps = cave_maps(model, both, region)
    fmap = predict(clf.feature_map, both["image"])
    up = torch.nn.functional.interpolate

    def cave_of(y, sel):
        return maps[sel][:, out.classes == y]

    def nmf_of(y, sel):
        return up(nmf.maps(fmap[sel], y), size=tuple(both["image"].shape[-2:]), mode="nearest")

    for name, fn in (("cave", cave_of), ("nmf", nmf_of)):
        c3 = class_consistency(fn, both, cfg)
        res[f"c3d_{name}"], res[f"c3d_floor_{name}"] = c3["score"], c3["floor"]
        res[f"loc_{name}"] = class_localisation(fn, both, cfg.metric.percentile, cfg.metric.threshold)
        other = "strict" if cfg.metric.threshold == "official" else "official"
        res[f"loc_{name}_arm"] = class_localisation(fn, both, cfg.metric.percentile, other)
    res["_model"], res["_clf"], res["_nmf"], res["_data"], res["_out"], res["_maps"] = (
        model,
        clf,
        nmf,
        both,
        out,
        maps,
    )
    return res
