"""C1's diagnosis: the cross-modal probe of a trained model and the data-side headroom of the BODIPY test.

Both use C1's test documents (`experiment.c1_documents`: image cells of a guide p, expression cells of p and of a
guide q whose lipid effect has the opposite sign) cut to **one image cell** per document, so that no other image
cell of the guide can carry its lipid level, and score the masked lipid-channel pixels (z-scored, as the loss):

- `cross_modal_probe`: the model's reconstruction with the S expression cells of p (matched), of q (mismatched) or
  none (image-only), with the training mask ratio on the image cell and, as a second probe, with the image cell
  fully masked (every pixel predicted from the expression half alone).
- `guide_mean_headroom`: no model: each masked pixel predicted by the mean training image of guide p (true) or q
  (mismatched), and by the mean image of all training cells; how much a guide's identity can lower the error.
"""

from __future__ import annotations

import numpy as np
import torch

from .data import Screen
from .encoders import patchify
from .model import random_mask


def _lipid_target(images: torch.Tensor, mean, std, patch: int, channel: int) -> torch.Tensor:
    """[n, C, H, W] raw -> [n, N, P·P] z-scored pixels of ``channel``, patch-major (as the model predicts them)."""
    m = torch.tensor(mean, dtype=images.dtype).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=images.dtype).view(1, -1, 1, 1)
    p2 = patch * patch
    return patchify((images - m) / s, patch)[..., channel * p2 : (channel + 1) * p2]


def _cells_and_masks(test: Screen, docs, n_patches: int, ratio: float, seed: int):
    """The first image cell of each document and its patch mask [n_docs, N] (True = masked)."""
    gen = torch.Generator().manual_seed(seed)
    cells = np.array([d[0][0] for d in docs])
    return cells, random_mask(len(docs), n_patches, ratio, gen)


@torch.no_grad()
def cross_modal_probe(model, test: Screen, docs, *, seed: int = 0, channel: int = 1, batch: int = 50) -> dict:
    """Masked lipid MSE of one image cell per document with matched / mismatched / no expression cells, at the
    training mask ratio (``masked``) and with the image fully masked (``full``); the relative gaps
    (mismatched − matched)/mismatched and (image-only − matched)/image-only."""
    model.eval()
    cfg = model.config
    imgs, cnts = torch.as_tensor(test.images), torch.as_tensor(test.counts)
    cells, part = _cells_and_masks(test, docs, cfg.n_patches, cfg.mask_ratio, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    S = len(docs[0][1])
    gene_mask = random_mask(len(docs) * S, cfg.n_genes, cfg.mask_ratio, gen).reshape(len(docs), S, -1)
    target = _lipid_target(imgs[cells], cfg.image_mean, cfg.image_std, cfg.patch_size, channel)
    p2 = cfg.patch_size**2
    out = {}
    for probe, mask in (("masked", part), ("full", torch.ones_like(part))):
        err = {"matched": 0.0, "mismatched": 0.0, "image_only": 0.0}
        for i in range(0, len(docs), batch):
            sl = slice(i, i + batch)
            g = len(cells[sl])
            z_img = model.encode_image(imgs[cells[sl]], mask[sl])
            for name, col in (("matched", 1), ("mismatched", 2), ("image_only", None)):
                if col is None:
                    z_expr = z_img.new_zeros(0, *z_img.shape[1:])
                else:
                    ids = np.concatenate([d[col] for d in docs[sl]])
                    z_expr = model.encode_expression(cnts[ids], gene_mask[sl].reshape(g * S, -1))
                h_img, _ = model.fuse(z_img, z_expr, g)
                pred = model.decode_image(h_img)[..., channel * p2 : (channel + 1) * p2]
                err[name] += float((((pred - target[sl]) ** 2).sum(-1) * mask[sl]).sum())
        n_pix = float(mask.sum()) * p2
        mse = {k: v / n_pix for k, v in err.items()}
        out[probe] = dict(
            mse=mse,
            gap=(mse["mismatched"] - mse["matched"]) / mse["mismatched"],
            gain_over_image_only=(mse["image_only"] - mse["matched"]) / mse["image_only"],
        )
    return out


def guide_mean_headroom(
    reference: Screen, test: Screen, docs, *, patch: int, mask_ratio: float, seed: int = 0, channel: int = 1
) -> dict:
    """The probe's cells (same cells and masks as `cross_modal_probe`) predicted without a model by the mean image
    of ``reference``'s cells of the true guide p, of the mismatched guide q and of all cells; lipid-channel MSE
    (z-scored with ``reference``'s statistics) on the masked pixels (``masked``) and on every pixel (``full``), the
    relative gap (mismatched − true)/mismatched and the true guide's gain over the all-cells mean."""
    from .training import channel_stats

    mean, std = channel_stats(reference.images)
    n_patches = (test.images.shape[-1] // patch) ** 2
    cells, part = _cells_and_masks(test, docs, n_patches, mask_ratio, seed)
    target = _lipid_target(torch.as_tensor(test.images[cells]), mean, std, patch, channel)
    ref = _lipid_target(torch.as_tensor(reference.images), mean, std, patch, channel)
    guides = reference.image_obs["guide"].to_numpy()
    gmean = {g: ref[guides == g].mean(0) for g in np.unique(guides)}
    img_guide, expr_guide = test.image_obs["guide"].to_numpy(), test.expression_obs["guide"].to_numpy()
    preds = {
        "true_guide": torch.stack([gmean[img_guide[c]] for c in cells]),
        "mismatched_guide": torch.stack([gmean[expr_guide[d[2][0]]] for d in docs]),
        "all_cells": ref.mean(0).expand_as(target),
    }
    out = {}
    for probe, mask in (("masked", part), ("full", torch.ones_like(part))):
        n_pix = float(mask.sum()) * target.shape[-1]
        m = {k: float((((p - target) ** 2).sum(-1) * mask).sum()) / n_pix for k, p in preds.items()}
        out[probe] = dict(
            mse=m,
            gap=(m["mismatched_guide"] - m["true_guide"]) / m["mismatched_guide"],
            gain_over_all_cells=(m["all_cells"] - m["true_guide"]) / m["all_cells"],
        )
    return out


def probe_rows(cfg, arms: dict, headroom: dict) -> list:
    """The report's check rows beside C1: H1 (the data-side headroom) and P1 (the cross-modal probe)."""
    from iclr26_core.report import Claim

    P, Q = ([r["probe"] for r in arms[a] if r.get("probe")] for a in ("petri", "permuted"))
    if not P or not Q:
        return []

    def mean(rs, probe, key, cond=None):
        return float(np.mean([r[probe][key] if cond is None else r[probe][key][cond] for r in rs]))

    hm, hf = headroom["masked"], headroom["full"]
    h1 = Claim(
        "H1",
        "headroom: the data carries C1's signal (no model: guide-mean images of the training cells)",
        "—",
        {k: round(v, 4) for k, v in hm["mse"].items()},
        hm["gap"] >= cfg.c1.min_gap,
        f"(MSE mismatched guide − MSE true guide)/MSE mismatched >= {cfg.c1.min_gap} on the probe's masked lipid "
        "pixels",
        f"gap {hm['gap']:.3f} (every pixel: {hf['gap']:.3f}); the true guide's gain over the all-cells mean image "
        f"{hm['gain_over_all_cells']:.4f} (every pixel {hf['gain_over_all_cells']:.4f}): knowing the guide "
        "lowers the error little, a wrong guide raises it much",
    )
    conds = ("matched", "mismatched", "image_only")

    def line(rs, probe):
        return "/".join(f"{mean(rs, probe, 'mse', c):.4f}" for c in conds)

    gp, gq = mean(P, "full", "gap"), mean(Q, "full", "gap")
    p1 = Claim(
        "P1",
        "probe: PETRI reads the expression half (one image cell, fully masked, S expression cells)",
        "—",
        {"petri": round(gp, 4), "permuted": round(gq, 4)},
        gp >= cfg.c1.min_gap and gp > gq,
        f"gap(PETRI) >= {cfg.c1.min_gap} and gap(PETRI) > gap(permuted), image fully masked",
        f"lipid MSE matched/mismatched/image-only, fully masked: PETRI {line(P, 'full')}, permuted "
        f"{line(Q, 'full')}; at mask {cfg.model.mask_ratio}: PETRI {line(P, 'masked')} (gap "
        f"{mean(P, 'masked', 'gap'):.4f}), permuted {line(Q, 'masked')} (gap {mean(Q, 'masked', 'gap'):.4f}); "
        f"PETRI's gain over image-only, fully masked {mean(P, 'full', 'gain_over_image_only'):.4f}",
    )
    return [h1, p1]
