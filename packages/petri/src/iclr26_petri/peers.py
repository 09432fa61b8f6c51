"""Peers on the same data, run by ``reproduce``:

- pycytominer's ``RobustMAD`` + ``Spherize(method="PCA")`` against our profiles (same embeddings);
- copairs' mAP of guide consistency (guides of one gene retrieve each other) on the same guide profiles, and its
  phenotypic activity (a guide's per-well replicates retrieve each other against control replicates);
- harmonypy: Harmony batch correction (by well) of each modality's embeddings before profiling (a variant);
- scvi-tools: scVI on the expression counts as a unimodal VAE baseline, through the same profile/metric code.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

import numpy as np
import pandas as pd

#: import name -> distribution name
PEERS = {"pycytominer": "pycytominer", "copairs": "copairs", "harmonypy": "harmonypy", "scvi": "scvi-tools"}


def missing_peers() -> list[str]:
    """Distribution names of the peers that are not installed."""
    return [dist for mod, dist in PEERS.items() if importlib.util.find_spec(mod) is None]


def pycytominer_whitened(emb: np.ndarray, obs: pd.DataFrame, control: np.ndarray, batch_key: str | None):
    """pycytominer's mad_robustize per batch (epsilon 1e-18) then PCA spherize fitted on controls."""
    from pycytominer.operations.transform import RobustMAD, Spherize

    df = pd.DataFrame(np.asarray(emb, dtype=np.float64))
    df.columns = [f"f{i}" for i in range(df.shape[1])]
    batches = obs[batch_key].to_numpy() if batch_key else np.zeros(len(obs))
    z = df.copy()
    for b in pd.unique(batches):
        rows = batches == b
        z.loc[rows] = RobustMAD(epsilon=1e-18).fit(df[rows & control]).transform(df[rows]).to_numpy()
    sph = Spherize(epsilon=1e-6, center=True, method="PCA", return_numpy=True).fit(z[control])
    return sph.transform(z)


def gram_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |A Aᵀ − B Bᵀ| / max |A Aᵀ|: PCA whitening is unique only up to the sign and order of components,
    so two implementations agree when their Gram matrices do."""
    ga, gb = a @ a.T, b @ b.T
    return float(np.abs(ga - gb).max() / np.abs(ga).max())


def copairs_consistency(guide_profiles: pd.DataFrame, gene_of_guide, *, null_size: int = 1000) -> dict:
    """copairs' mAP where a guide's positives are the other guides of its gene and its negatives the guides of
    other genes (controls excluded): mean mAP over genes and the fraction with BH-corrected p < 0.05."""
    from copairs.map import average_precision, mean_average_precision

    keep = [g for g in guide_profiles.index if g in gene_of_guide and gene_of_guide[g] != "NTC"]
    meta = pd.DataFrame({"guide": keep, "gene": [gene_of_guide[g] for g in keep]})
    feats = guide_profiles.loc[keep].to_numpy(dtype=np.float64)
    ap = average_precision(meta, feats, ["gene"], [], [], ["gene"], progress_bar=False)
    m = mean_average_precision(ap, ["gene"], null_size=null_size, threshold=0.05, seed=0, progress_bar=False)
    return {
        "map": float(m["mean_average_precision"].mean()),
        "fraction_significant": float(m["below_corrected_p"].mean()),
    }


def copairs_activity(replicates: pd.DataFrame, controls: Iterable[str], *, null_size: int = 1000) -> dict:
    """copairs' phenotypic activity: mAP of a guide's replicates (rows of a (guide, batch) MultiIndex, e.g.
    `replicate_profiles`) retrieving each other against the replicates of the ``controls`` guides; mean mAP over
    the other guides and the fraction with BH-corrected p < 0.05."""
    from copairs.map import average_precision, mean_average_precision
    from copairs.matching import assign_reference_index

    meta = replicates.index.to_frame(index=False)
    meta.columns = ["guide", "batch"]
    meta["is_control"] = meta["guide"].isin(set(controls))
    meta = assign_reference_index(meta, "is_control", reference_col="ref", default_value=-1)
    feats = replicates.to_numpy(dtype=np.float64)
    by = ["guide", "ref"]
    ap = average_precision(meta, feats, by, [], [], by, progress_bar=False)
    ap = ap[~ap["is_control"]]
    m = mean_average_precision(ap, by, null_size=null_size, threshold=0.05, seed=0, progress_bar=False)
    return {
        "map": float(m["mean_average_precision"].mean()),
        "fraction_significant": float(m["below_corrected_p"].mean()),
    }


def harmony_corrected(emb: np.ndarray, obs: pd.DataFrame, batch_key: str = "well", seed: int = 0):
    """Harmony (harmonypy) on one modality's embeddings with the wells as batches: [n, D] corrected."""
    from harmonypy import run_harmony

    z = np.asarray(emb, dtype=np.float64)
    ho = run_harmony(z, obs[[batch_key]].astype(str), [batch_key], verbose=False, random_state=seed, ncores=1)
    out = np.asarray(ho.Z_corr)
    return out if out.shape == z.shape else out.T


def scvi_embeddings(
    train_counts: np.ndarray, test_counts: np.ndarray, *, n_latent: int = 16, max_epochs: int = 30, seed=0
):
    """scVI (scvi-tools) trained on the training counts; the posterior means of the test cells [n, n_latent]."""
    import logging

    import anndata
    import scvi

    scvi.settings.verbosity = logging.ERROR
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "scvi"):
        logging.getLogger(name).setLevel(logging.ERROR)
    scvi.settings.seed = seed
    tr = anndata.AnnData(np.asarray(train_counts, dtype=np.float32))
    te = anndata.AnnData(np.asarray(test_counts, dtype=np.float32))
    scvi.model.SCVI.setup_anndata(tr)
    model = scvi.model.SCVI(tr, n_latent=n_latent)
    model.train(
        max_epochs=max_epochs,
        accelerator="cpu",
        devices=1,
        enable_progress_bar=False,
        logger=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    return np.asarray(model.get_latent_representation(te))
