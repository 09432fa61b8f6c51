"""The evaluation pieces of ``reproduce`` besides training: profiles and their metrics (TPR@5%FPR, AUC, GC), the
late-fusion PCA baseline, and the peers on the same data (pycytominer, copairs, harmonypy, scvi-tools)."""

from __future__ import annotations

import numpy as np


def _profiles(emb_i, emb_e, test):
    from .profiles import perturbation_profiles

    mods = {"image": (emb_i, test.image_obs), "expression": (emb_e, test.expression_obs)}
    return perturbation_profiles(
        {m: v for m, v in mods.items() if v[0] is not None},
        context_key="guide",
        control_value="NTC",
        batch_key="well",
        gene_key="gene",
    )


def _profiles_metrics(emb_i, emb_e, test, cfg) -> dict:
    """TPR@5%FPR, AUC and GC fraction of the image, expression and multimodal profiles (those available)."""
    from .metrics import guide_consistency, relationship_recall

    prof = _profiles(emb_i, emb_e, test)
    out = {}
    guides = {**prof.per_modality, **({"multimodal": prof.multimodal} if prof.multimodal is not None else {})}
    for m, g in guides.items():
        rec = relationship_recall(prof.genes[m], test.truth["positives"])
        gc = guide_consistency(g, test.truth["gene_of_guide"], n_null=cfg.metrics.n_null, seed=0)
        out[m] = dict(tpr=rec.tpr, auc=rec.auc, gc=gc.fraction, roc=rec.roc)
    return out


def _late_fusion(test, n_pcs: int) -> dict:
    """Late fusion of PCA on raw features: 32 PCs of pixels and of log1p counts, profiles concatenated."""
    import pandas as pd
    from sklearn.decomposition import PCA

    from .metrics import guide_consistency, relationship_recall
    from .profiles import perturbation_profiles

    xi = PCA(n_pcs, random_state=0).fit_transform(test.images.reshape(len(test.images), -1))
    xe = PCA(n_pcs, random_state=0).fit_transform(np.log1p(test.counts))
    prof = perturbation_profiles(
        {"image": (xi, test.image_obs), "expression": (xe, test.expression_obs)},
        context_key="guide",
        control_value="NTC",
        batch_key="well",
        gene_key="gene",
    )
    cat = pd.concat([prof.genes["image"], prof.genes["expression"]], axis=1, join="inner")
    cat_g = pd.concat([prof.per_modality["image"], prof.per_modality["expression"]], axis=1, join="inner")
    rec = relationship_recall(cat, test.truth["positives"])
    gc = guide_consistency(cat_g, test.truth["gene_of_guide"], n_null=1000 if len(cat_g) > 20 else None)
    return dict(tpr=rec.tpr, auc=rec.auc, gc=gc.fraction, roc=rec.roc)


def _peers(ctx, cfg, arms, train, test) -> dict:
    """The installed peers on PETRI's embeddings (see `peers`): pycytominer's whitening against ours, copairs' mAP
    and phenotypic activity, Harmony-corrected embeddings through our profile and metric code (scVI: `_scvi`)."""
    from . import peers as P
    from .profiles import robust_center_scale, spherize

    missing = P.missing_peers()
    ctx.peers_missing(missing)
    ei, ee = arms["petri"][0].pop("emb")
    out: dict = {}
    if "pycytominer" not in missing:
        for m, emb, obs in (("image", ei, test.image_obs), ("expression", ee, test.expression_obs)):
            control = (obs["gene"] == "NTC").to_numpy()
            wells = obs["well"].to_numpy()
            ours = np.empty(emb.shape)
            for w in np.unique(wells):
                rows = wells == w
                ours[rows] = robust_center_scale(np.asarray(emb, np.float64)[rows], control[rows])
            ours = spherize(ours, control)
            out[f"pycytominer_gram_diff_{m}"] = P.gram_difference(
                ours, P.pycytominer_whitened(emb, obs, control, "well")
            )
        ctx.log(
            "pycytominer: whitened profiles match ours, relative Gram difference "
            + ", ".join(f"{m} {out[f'pycytominer_gram_diff_{m}']:.1e}" for m in ("image", "expression"))
        )
    if "copairs" not in missing:
        prof = _profiles(ei, ee, test)
        guides = {**prof.per_modality, "multimodal": prof.multimodal}
        out["copairs"] = {
            m: P.copairs_consistency(g, test.truth["gene_of_guide"], null_size=cfg.metrics.n_null)
            for m, g in guides.items()
        }
        ctx.log(
            "copairs mAP (guide consistency, PETRI seed 0): "
            + ", ".join(
                f"{m} {v['map']:.3f} ({v['fraction_significant']:.2f} sig.)"
                for m, v in out["copairs"].items()
            )
        )
        reps = _replicates(ei, ee, test)
        gene_of = test.truth["gene_of_guide"]
        controls = [g for g, gene in gene_of.items() if gene == "NTC"]
        out["copairs_activity"] = {
            m: P.copairs_activity(r, controls, null_size=cfg.metrics.n_null) for m, r in reps.items()
        }
        ctx.log(
            "copairs phenotypic activity (per-well replicates vs controls, PETRI seed 0): "
            + ", ".join(
                f"{m} {v['map']:.3f} ({v['fraction_significant']:.2f} sig.)"
                for m, v in out["copairs_activity"].items()
            )
        )
    if "harmonypy" not in missing:
        hi, he = P.harmony_corrected(ei, test.image_obs), P.harmony_corrected(ee, test.expression_obs)
        out["harmony"] = _strip(_profiles_metrics(hi, he, test, cfg))
        ctx.log(f"harmonypy-corrected PETRI embeddings: {_fmt(out['harmony'])}")
    return out


def _scvi(ctx, cfg, train, test) -> dict | None:
    """scVI (scvi-tools) on the training counts, the test cells' latents through our profile/metric code."""
    from . import peers as P

    if "scvi-tools" in P.missing_peers():
        return None
    z = P.scvi_embeddings(
        train.counts, test.counts, n_latent=cfg.peers.scvi_latent, max_epochs=cfg.peers.scvi_epochs
    )
    return _strip(_profiles_metrics(None, z, test, cfg))


def _replicates(emb_i, emb_e, test) -> dict:
    """Per-(guide, well) replicate profiles of each modality and their mean over shared rows (multimodal)."""
    from .profiles import replicate_profiles

    kw = dict(context_key="guide", control_value="NTC", batch_key="well", control_context_key="gene")
    reps = {
        "image": replicate_profiles(emb_i, test.image_obs, **kw),
        "expression": replicate_profiles(emb_e, test.expression_obs, **kw),
    }
    common = reps["image"].index.intersection(reps["expression"].index)
    reps["multimodal"] = (reps["image"].loc[common] + reps["expression"].loc[common]) / 2
    return reps


def _strip(res: dict) -> dict:
    return {m: {k: v for k, v in x.items() if k != "roc"} for m, x in res.items()}


def _fmt(res: dict) -> str:
    return "; ".join(f"{m} TPR {v['tpr']:.3f}, GC {v['gc']:.3f}" for m, v in res.items())
