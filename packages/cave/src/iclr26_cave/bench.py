"""`reproduce bench=true`: peers side by side on one seed's test images (clean + occluded).

- CRAFT (craft-xai): concepts by NMF on the 2D baseline's ReLU'd activations of image crops (its own patch
  pipeline), per class, the same number of concepts per class as CAVE; its per-pixel coefficient maps are scored with
  the same 3D-C and localisation as our NMF rows.
- LRP (zennit): CAVE's concepts as pixel-level input-relevance maps (`iclr26_cave.lrp`, clamped ≥ 0).
- quantus: relevance-mass accuracy and attribution localisation of every method's maps inside the part (3×3
  dilated) that holds most of each map's mass: a second computation next to our localisation (§6).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .consistency import global_coverage
from .experiment import class_consistency, class_localisation, load_split, per_class_mean, region_of
from .training import predict

MISSING_HINT = "(pip install iclr26-cave[peers])"


def missing_peers() -> list[str]:
    import importlib.util

    return [
        m
        for m, mod in (("zennit", "zennit"), ("craft-xai", "craft"), ("quantus", "quantus"))
        if importlib.util.find_spec(mod) is None
    ]


def _import_craft():
    """craft-xai 0.0.3's torch module imports tensorflow at module level for one class, its TF Sobol sampler (used
    only by `Craft.estimate_importance`, which the bench does not call): without tensorflow, import it with a
    placeholder module that raises on any use."""
    import importlib.util
    import sys
    import types

    if "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is not None:
        from craft.craft_torch import Craft

        return Craft

    def missing(name):
        raise ImportError(f"tensorflow.{name}: tensorflow is not installed (craft-xai's TF Sobol sampler)")

    stub = types.ModuleType("tensorflow")
    stub.__getattr__ = missing
    sys.modules["tensorflow"] = stub
    try:
        from craft.craft_torch import Craft
    finally:
        del sys.modules["tensorflow"]
    return Craft


def craft_maps(clf, train: dict, data: dict, n_concepts: int, patch: int, seed: int):
    """Per class, a craft-xai `Craft` fitted on that class's training images; returns maps_of_class(y, sel)."""
    Craft = _import_craft()

    def latent(x):
        return clf.feature_map(x).clamp_min(0)

    size = tuple(data["image"].shape[-2:])
    fmap = predict(latent, data["image"])
    models = {}
    for y in sorted(set(train["label"].tolist())):
        np.random.seed(seed)
        torch.manual_seed(seed)
        craft = Craft(latent, number_of_concepts=n_concepts, batch_size=64, patch_size=patch, device="cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            craft.fit(train["image"][train["label"] == y])
        models[y] = craft

    def maps_of_class(y, sel):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            u = models[y].transform(None, activations=fmap[sel])
        u = torch.from_numpy(np.asarray(u, dtype=np.float32)).permute(0, 3, 1, 2)
        return F.interpolate(u, size=size, mode="nearest")

    return maps_of_class


def lrp_maps(model, data: dict, region: str):
    """maps_of_class for CAVE's concepts by LRP (positive relevance) of the contributions over Ω (``region``)."""
    from .lrp import lrp_concept_maps

    classes = model.bank().classes
    cache: dict[int, torch.Tensor] = {}

    def maps_of_class(y, sel):
        if y not in cache:
            ids = (classes == y).nonzero()[:, 0].tolist()
            images = data["image"][sel]
            with torch.no_grad():
                grid = tuple(model.features(images[:1]).shape[-2:])
            omega = region_of({"image": images, "box": data["box"][sel]}, grid, region)
            cache[y] = lrp_concept_maps(model, images, concepts=ids, region=omega).clamp_min(0)
        return cache[y]

    return maps_of_class


def quantus_localisation(maps_of_class, data: dict, max_maps: int = 400, seed: int = 0) -> dict[str, float]:
    """quantus' RelevanceMassAccuracy and AttributionLocalisation of each non-empty concept map inside its best
    (most-mass, 3×3 dilated) part."""
    import quantus

    xs, ys, a_s, s_s = [], [], [], []
    for y in range(int(data["label"].max()) + 1):
        sel = data["label"] == y
        maps = maps_of_class(y, sel).clamp_min(0)  # [N,T,H,W]
        parts = data["part_mask"][sel]
        n_parts = int(parts.max()) + 1
        onehot = torch.stack([(parts == p).float() for p in range(n_parts)], 1)  # [N,P,H,W]
        dil = F.max_pool2d(onehot, 3, stride=1, padding=1)
        mass = torch.einsum("nthw,nphw->ntp", maps, dil)
        best = mass.argmax(-1)
        images = data["image"][sel]
        for n, t in (maps.flatten(2).sum(-1) > 0).nonzero().tolist():
            xs.append(images[n])
            ys.append(y)
            a_s.append(maps[n, t][None])
            s_s.append(dil[n, best[n, t]][None])
    if not xs:
        return {"relevance_mass": math.nan, "attribution_localisation": math.nan, "maps": 0}
    idx = np.random.default_rng(seed).permutation(len(xs))[:max_maps]
    x = torch.stack([xs[i] for i in idx]).numpy()
    yb = np.array([ys[i] for i in idx])
    a = torch.stack([a_s[i] for i in idx]).numpy()
    s = torch.stack([s_s[i] for i in idx]).numpy()
    kw = dict(abs=False, normalise=False, disable_warnings=True)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, metric in (
            ("relevance_mass", quantus.RelevanceMassAccuracy(**kw)),
            ("attribution_localisation", quantus.AttributionLocalisation(**kw)),
        ):
            vals = np.asarray(metric(model=None, x_batch=x, y_batch=yb, a_batch=a, s_batch=s), dtype=float)
            out[name] = float(np.nanmean(vals))
    out["maps"] = len(idx)
    return out


def class_global_coverage(maps_of_class, data: dict, percentile: float, threshold: str = "official") -> float:
    """Global coverage (§6) of a method: per class, the union of its concepts' maps against the union of the parts,
    per image; the mean over all images where some concept is active."""
    return per_class_mean(global_coverage, maps_of_class, data, percentile, threshold)


def run_bench(cfg, seed: int, res: dict[str, Any], ctx) -> dict[str, dict[str, float]]:
    """Rows {method: {c3d, c3d_floor, loc, global_coverage, relevance_mass, attribution_localisation}} for CAVE, 2D NMF, CRAFT and
    LRP on the seed's explanation images."""
    model, clf, nmf, data, out, maps = (res[k] for k in ("_model", "_clf", "_nmf", "_data", "_out", "_maps"))
    size = tuple(data["image"].shape[-2:])
    fmap = predict(clf.feature_map, data["image"])
    train = load_split(cfg.data.n_train, "train", seed, cfg.data.size)
    methods = {
        "cave": lambda y, sel: maps[sel][:, out.classes == y],
        "nmf": lambda y, sel: F.interpolate(nmf.maps(fmap[sel], y), size=size, mode="nearest"),
        "craft": craft_maps(clf, train, data, cfg.concepts.n_concepts, cfg.craft.patch, seed),
        "lrp": lrp_maps(model, data, cfg.eval.region),
    }
    rows = {}
    for name, fn in ctx.progress(list(methods.items()), desc="bench"):
        c3 = class_consistency(fn, data, cfg)
        row = {
            "c3d": c3["score"],
            "c3d_floor": c3["floor"],
            "loc": class_localisation(fn, data, cfg.metric.percentile, cfg.metric.threshold),
            "global_coverage": class_global_coverage(fn, data, cfg.metric.percentile, cfg.metric.threshold),
        }
        row.update(quantus_localisation(fn, data, seed=seed))
        rows[name] = row
        ctx.log(
            f"bench seed {seed} {name}: 3D-C {row['c3d']:.3f} (floor {row['c3d_floor']:.3f}), loc {row['loc']:.3f}, "
            f"global coverage {row['global_coverage']:.3f}, "
            f"quantus relevance mass {row['relevance_mass']:.3f}, attribution localisation "
            f"{row['attribution_localisation']:.3f}"
        )
    return rows
