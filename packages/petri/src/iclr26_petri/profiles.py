"""Perturbation profiles: robust centre-scale against controls, control-fitted whitening, means per guide/gene.

Per modality: z = (x − median_ctrl)/(1.4826·MAD_ctrl + 1e-18) per batch (pycytominer's ``mad_robustize``),
then PCA whitening fitted on the controls, (x − μ_c)·V·(Λ + 1e-6)^{-1/2} (pycytominer's ``spherize``, PCA,
no reduction). Guide profile = mean over its cells; gene profile = mean over its guides; the multimodal profile
is the mean of the image and expression profiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

MAD_SCALE, EPS_MAD, EPS_WHITEN = 1.4826, 1e-18, 1e-6


@dataclass
class Profiles:
    """``per_modality[m]``: guide profiles (rows = guides, controls included); ``multimodal``: the mean of the
    modalities' guide profiles over the guides they share; ``genes[m]``: gene profiles (mean over guides,
    controls excluded) for every modality and ``"multimodal"``."""

    per_modality: dict[str, pd.DataFrame]
    multimodal: pd.DataFrame | None
    genes: dict[str, pd.DataFrame]


def robust_center_scale(x: np.ndarray, control: np.ndarray) -> np.ndarray:
    """(x − median(x[control]))/(1.4826·MAD(x[control]) + 1e-18), per column."""
    ref = x[control]
    med = np.median(ref, axis=0)
    mad = np.median(np.abs(ref - med), axis=0)
    return (x - med) / (MAD_SCALE * mad + EPS_MAD)


def spherize(x: np.ndarray, control: np.ndarray) -> np.ndarray:
    """PCA whitening fitted on the control rows: (x − μ_c)·V·(Λ + 1e-6)^{-1/2} (sample covariance, ddof = 1)."""
    ref = x[control]
    mu = ref.mean(0)
    cov = np.cov(ref - mu, rowvar=False)  # ddof = 1, as pycytominer
    lam, vec = np.linalg.eigh(cov)
    return (x - mu) @ vec / np.sqrt(np.clip(lam, 0, None) + EPS_WHITEN)


def _check_columns(obs: pd.DataFrame, keys: list[str | None], modality: str) -> None:
    from iclr26_core.errors import UserError

    for key in keys:
        if key is not None and key not in obs.columns:
            raise UserError(
                f"obs column {key!r} missing in the {modality} obs (columns: {list(obs.columns)})"
            )


def modality_profiles(
    emb: np.ndarray, obs: pd.DataFrame, *, context_key: str, control_value: str, batch_key: str | None = None
) -> pd.DataFrame:
    """Guide profiles of one modality: robust z per batch against its controls, spherize on controls, means."""
    control = (obs[context_key].astype(str) == str(control_value)).to_numpy()
    return _guide_level(emb, obs, control, context_key, batch_key)


def perturbation_profiles(
    embeddings: Mapping[str, tuple],
    *,
    context_key: str,
    control_value: str,
    batch_key: str | None = None,
    gene_key: str | None = None,
    control_context_key: str | None = None,
) -> Profiles:
    """Profiles from ``{modality: (embeddings [n, D], obs)}``. Controls are the cells whose
    ``control_context_key`` (default ``gene_key`` or else ``context_key``) equals ``control_value``; guide
    profiles are indexed by ``context_key``; gene profiles average guides by ``gene_key`` (default: one guide
    per gene)."""
    ctrl_key = control_context_key or gene_key or context_key
    per_mod, gene_of = {}, {}
    for m, (emb, obs) in embeddings.items():
        _check_columns(obs, [context_key, batch_key, gene_key, ctrl_key], m)
        control = (obs[ctrl_key].astype(str) == str(control_value)).to_numpy()
        prof = _guide_level(np.asarray(emb), obs, control, context_key, batch_key)
        per_mod[m] = prof
        src = obs[gene_key] if gene_key else obs[context_key]
        gene_of.update(dict(zip(obs[context_key].astype(str), src.astype(str), strict=True)))
    mods = list(per_mod)
    multi = None
    if len(mods) >= 2:
        common = sorted(set.intersection(*(set(per_mod[m].index) for m in mods)))
        multi = sum(per_mod[m].loc[common].to_numpy() for m in mods) / len(mods)
        multi = pd.DataFrame(multi, index=common)
    genes = {}
    for m, prof in [*per_mod.items(), *([("multimodal", multi)] if multi is not None else [])]:
        g = prof.index.map(gene_of)
        keep = g != str(control_value)
        genes[m] = prof[keep].groupby(g[keep]).mean()
    return Profiles(per_mod, multi, genes)


def replicate_profiles(
    emb: np.ndarray,
    obs: pd.DataFrame,
    *,
    context_key: str,
    control_value: str,
    batch_key: str,
    control_context_key: str | None = None,
) -> pd.DataFrame:
    """Replicate-level profiles of one modality: the normalised, whitened cells (as for `perturbation_profiles`;
    controls are the cells whose ``control_context_key``, default ``context_key``, equals ``control_value``)
    averaged per (context, batch), with that MultiIndex: the replicates of copairs' phenotypic activity."""
    ctrl_key = control_context_key or context_key
    _check_columns(obs, [context_key, batch_key, ctrl_key], "replicate")
    control = (obs[ctrl_key].astype(str) == str(control_value)).to_numpy()
    w = normalized_cells(emb, obs, control, batch_key)
    keys = [obs[context_key].astype(str).to_numpy(), obs[batch_key].astype(str).to_numpy()]
    return pd.DataFrame(w).groupby(keys).mean().rename_axis([context_key, batch_key])


def _guide_level(emb, obs, control, context_key, batch_key) -> pd.DataFrame:
    w = normalized_cells(emb, obs, control, batch_key)
    return pd.DataFrame(w).groupby(obs[context_key].astype(str).to_numpy()).mean()


def normalized_cells(emb, obs, control, batch_key) -> np.ndarray:
    """Cells robust-z'd per batch against its controls, then whitened on all controls."""
    from iclr26_core.errors import UserError

    emb = np.asarray(emb, dtype=np.float64)
    if not control.any():
        raise UserError("no control cells")
    batches = obs[batch_key].to_numpy() if batch_key else np.zeros(len(obs))
    z = np.empty_like(emb)
    for b in pd.unique(batches):
        rows = batches == b
        if not (rows & control).any():
            raise UserError(f"batch {b!r} has no control cells")
        z[rows] = robust_center_scale(emb[rows], control[rows])
    return spherize(z, control)
