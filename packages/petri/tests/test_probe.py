"""C1's cross-modal probe against the model's own forward pass, and the guide-mean headroom against a brute-force
numpy computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from iclr26_petri import DocumentBatch, PetriConfig, PetriModel
from iclr26_petri.data import Screen
from iclr26_petri.model import random_mask
from iclr26_petri.probe import cross_modal_probe, guide_mean_headroom


def _model(mst_layers=1):
    torch.manual_seed(0)
    cfg = dict(
        n_channels=2, image_size=8, patch_size=4, n_genes=9, hidden_size=12, num_heads=2, image_layers=1
    )
    return PetriModel(PetriConfig(**cfg, n_latents=3, perceiver_rounds=1, mst_layers=mst_layers, dec_depth=1))


def _screen(n=12, seed=0):
    rng = np.random.default_rng(seed)
    guides = np.repeat(["gA", "gB", "gC"], n // 3)
    obs = pd.DataFrame({"guide": guides})
    rate = np.repeat([1.0, 4.0, 200.0], n // 3)[:, None]  # guide gC's cells far from the others
    counts = rng.poisson(rate * np.ones((n, 9))).astype(np.float32)
    return Screen(rng.random((n, 2, 8, 8)).astype(np.float32), obs, counts, obs.copy())


def _docs(S=1):
    """(image cells, matched expression cells, mismatched expression cells) of guides gA/gB vs gC."""
    rng = np.random.default_rng(1)
    return [(np.array([i]), rng.integers(0, 4, S) + 4 * (i // 4), rng.integers(8, 12, S)) for i in range(8)]


def test_probe_equals_the_forward_pass_on_one_cell_documents():
    """With one expression cell per document the probe's matched/mismatched MSE is the forward pass's lipid-channel
    error on the masked patches of [G, 1] documents with the same masks."""
    model, test, docs = _model().eval(), _screen(), _docs()
    res = cross_modal_probe(model, test, docs, seed=3, batch=3)
    im_mask = random_mask(8, 4, 0.75, torch.Generator().manual_seed(3))
    gene_mask = random_mask(8, 9, 0.75, torch.Generator().manual_seed(4))
    imgs = torch.as_tensor(test.images[[d[0][0] for d in docs]])[:, None]
    target = (
        model.normalize_images(imgs[:, 0])[:, 1]
        .reshape(8, 2, 4, 2, 4)
        .permute(0, 1, 3, 2, 4)
        .reshape(8, 4, 16)
    )
    for name, col in (("matched", 1), ("mismatched", 2)):
        counts = torch.as_tensor(test.counts[[d[col][0] for d in docs]])[:, None]
        with torch.no_grad():
            out = model(DocumentBatch(imgs, counts, None, im_mask[:, None], gene_mask[:, None]))
        pred = out.image_pred[:, 0, :, 16:]
        want = (((pred - target) ** 2).mean(-1) * im_mask).sum() / im_mask.sum()
        assert abs(res["masked"]["mse"][name] - float(want)) < 1e-6


def test_without_fusion_the_expression_half_changes_nothing():
    """mst_layers = 0: matched, mismatched and image-only predictions coincide (masked and fully masked)."""
    res = cross_modal_probe(_model(mst_layers=0).eval(), _screen(), _docs(S=3), seed=0)
    for probe in ("masked", "full"):
        mse = res[probe]["mse"]
        assert mse["matched"] == mse["mismatched"] == mse["image_only"] and res[probe]["gap"] == 0.0
    with_mst = cross_modal_probe(_model().eval(), _screen(), _docs(S=3), seed=0)["full"]["mse"]
    assert len({with_mst["matched"], with_mst["mismatched"], with_mst["image_only"]}) == 3
    assert np.isfinite(list(with_mst.values())).all()


def test_guide_mean_headroom_brute_force():
    ref, test, docs = _screen(seed=5), _screen(seed=6), _docs()
    res = guide_mean_headroom(ref, test, docs, patch=4, mask_ratio=0.75, seed=2)
    x = ref.images.astype(np.float64)
    mu, sd = x.mean((0, 2, 3)), x.std((0, 2, 3))
    z = lambda a: ((a - mu[:, None, None]) / sd[:, None, None])[1]  # noqa: E731
    mean_of = {
        g: np.mean([z(x[i]) for i in np.flatnonzero(ref.image_obs.guide == g)], 0) for g in ["gA", "gB", "gC"]
    }
    everyone = np.mean([z(v) for v in x], 0)
    mask = random_mask(8, 4, 0.75, torch.Generator().manual_seed(2)).numpy()
    err = {"true_guide": [], "mismatched_guide": [], "all_cells": [], "true_full": []}
    for k, d in enumerate(docs):
        cell = z(test.images[d[0][0]].astype(np.float64))
        preds = {
            "true_guide": mean_of[test.image_obs.guide[d[0][0]]],
            "mismatched_guide": mean_of[test.expression_obs.guide[d[2][0]]],
            "all_cells": everyone,
        }
        for name, p in preds.items():
            sq = (p - cell) ** 2
            for j in range(4):  # patch j = rows 4·(j // 2).., cols 4·(j % 2)..
                if mask[k, j]:
                    err[name].append(
                        sq[4 * (j // 2) : 4 * (j // 2) + 4, 4 * (j % 2) : 4 * (j % 2) + 4].ravel()
                    )
        err["true_full"].append(((preds["true_guide"] - cell) ** 2).ravel())
    for name in ("true_guide", "mismatched_guide", "all_cells"):
        np.testing.assert_allclose(res["masked"]["mse"][name], np.concatenate(err[name]).mean(), rtol=1e-5)
    np.testing.assert_allclose(
        res["full"]["mse"]["true_guide"], np.concatenate(err["true_full"]).mean(), rtol=1e-5
    )
    m = res["masked"]["mse"]
    assert res["masked"]["gap"] == (m["mismatched_guide"] - m["true_guide"]) / m["mismatched_guide"]
