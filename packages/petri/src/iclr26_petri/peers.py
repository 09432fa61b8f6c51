"""Peers on the same embeddings: pycytominer's ``RobustMAD`` + ``Spherize(method="PCA")`` against our profiles."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd

PEERS = ("pycytominer",)


def missing_peers() -> list[str]:
    return [p for p in PEERS if importlib.util.find_spec(p) is None]


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
