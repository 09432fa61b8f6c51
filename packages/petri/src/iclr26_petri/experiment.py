"""The miniature experiment's pieces: train one arm (PETRI or permuted control), the BODIPY cross-modal test (C1),
embeddings and profiles of one trained model."""

from __future__ import annotations

import numpy as np
import torch

from .config import PetriConfig
from .data import Screen
from .model import DocumentBatch, PetriModel, random_mask
from .training import channel_stats, train_petri


def model_config(cfg, screen: Screen, mst_layers: int | None = None) -> PetriConfig:
    mean, std = channel_stats(screen.images)
    m = cfg.model
    return PetriConfig(
        n_channels=screen.images.shape[1],
        image_size=screen.images.shape[-1],
        patch_size=m.patch_size,
        n_genes=screen.counts.shape[1],
        hidden_size=m.hidden_size,
        num_heads=m.num_heads,
        image_layers=m.image_layers,
        n_latents=m.n_latents,
        perceiver_rounds=m.perceiver_rounds,
        mst_layers=m.mst_layers if mst_layers is None else mst_layers,
        dec_depth=m.dec_depth,
        mask_ratio=m.mask_ratio,
        likelihood=m.likelihood,
        modality_embedding=m.modality_embedding,
        image_mean=mean,
        image_std=std,
    )


def c1_documents(test: Screen, n_docs: int, S: int, min_effect: float, pathways=(0, 1, 2), seed: int = 0):
    """BODIPY-test documents: image cells of guide p (pathways 0–2, |e·γ_{g,0}| ≥ ``min_effect``) paired with
    expression cells of p (matched) or of a guide whose lipid effect has the opposite sign (mismatched)."""
    rng = np.random.default_rng(seed)
    le, pw = test.truth["lipid_effect"], test.truth["pathway_of_guide"]
    cand = [g for g in le if pw[g] in pathways and abs(le[g]) >= min_effect]
    pos, neg = [g for g in cand if le[g] > 0], [g for g in cand if le[g] < 0]
    if not pos or not neg:
        return None
    img_guide, expr_guide = test.image_obs["guide"].to_numpy(), test.expression_obs["guide"].to_numpy()
    docs = []
    for _ in range(n_docs):
        p = cand[rng.integers(len(cand))]
        others = neg if le[p] > 0 else pos
        q = others[rng.integers(len(others))]
        docs.append(
            (
                rng.choice(np.flatnonzero(img_guide == p), S),
                rng.choice(np.flatnonzero(expr_guide == p), S),
                rng.choice(np.flatnonzero(expr_guide == q), S),
            )
        )
    return docs


@torch.no_grad()
def c1_gap(model: PetriModel, test: Screen, docs, seed: int = 0, channel: int = 1) -> dict:
    """Masked lipid-channel MSE with matched and mismatched expression (same image cells and masks) and the
    relative gap (MSE_mis − MSE_match)/MSE_mis."""
    model.eval()
    cfg = model.config
    gen = torch.Generator().manual_seed(seed)
    imgs, cnts = torch.as_tensor(test.images), torch.as_tensor(test.counts)
    S = len(docs[0][0])
    P2 = cfg.patch_size**2
    err = {"matched": 0.0, "mismatched": 0.0}
    n_pix = 0.0
    for i in range(0, len(docs), 32):
        chunk = docs[i : i + 32]
        g = len(chunk)
        im = imgs[np.concatenate([d[0] for d in chunk])].reshape(g, S, *imgs.shape[1:])
        im_mask = random_mask(g * S, cfg.n_patches, cfg.mask_ratio, gen).reshape(g, S, -1)
        gene_mask = random_mask(g * S, cfg.n_genes, cfg.mask_ratio, gen).reshape(g, S, -1)
        from .encoders import patchify

        target = patchify(model.normalize_images(im.reshape(g * S, *im.shape[2:])), cfg.patch_size)
        target = target[..., channel * P2 : (channel + 1) * P2].reshape(g, S, cfg.n_patches, P2)
        for name, col in (("matched", 1), ("mismatched", 2)):
            ex = cnts[np.concatenate([d[col] for d in chunk])].reshape(g, S, -1)
            out = model(DocumentBatch(im, ex, None, im_mask, gene_mask))
            pred = out.image_pred[..., channel * P2 : (channel + 1) * P2]
            err[name] += float((((pred - target) ** 2).sum(-1) * im_mask).sum())
        n_pix += float(im_mask.sum()) * P2
    mse = {k: v / n_pix for k, v in err.items()}
    return dict(
        mse_matched=mse["matched"],
        mse_mismatched=mse["mismatched"],
        gap=(mse["mismatched"] - mse["matched"]) / mse["mismatched"],
    )


def train_arm(job: dict) -> dict:
    """One training (run in a worker process): returns the state dict, the config, the log and C1 gaps at the
    logged steps."""
    torch.set_num_threads(1)
    cfg, train, test, permute, seed = job["cfg"], job["train"], job["test"], job["permute"], job["seed"]
    torch.manual_seed(seed)
    model = PetriModel(model_config(cfg, train))
    gaps = {}

    def cb(step, m):
        gaps[step] = c1_gap(m, test, job["c1_docs"], seed=seed)["gap"]

    t = cfg.train
    log = train_petri(
        model,
        train.images,
        train.image_obs["guide"].to_numpy(),
        train.counts,
        train.expression_obs["guide"].to_numpy(),
        steps=t.steps,
        documents=t.documents,
        cells_per_document=t.cells_per_document,
        lr=t.lr,
        weight_decay=t.weight_decay,
        warmup=t.get("warmup", 0),
        permute=permute,
        seed=seed,
        callback=cb,
        callback_steps=[*list(t.log_steps), t.steps],
    )
    return dict(
        state=model.state_dict(),
        config=model.config.to_dict(),
        log=log,
        gaps=gaps,
        permute=permute,
        seed=seed,
    )
