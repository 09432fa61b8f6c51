"""The headroom oracle against scikit-learn's Ridge (an independent computation) and on planted data."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import Ridge as SkRidge

from iclr26_omnifield.experiment import SensorData
from iclr26_omnifield.oracle import features, fit_oracle, oracle_mse, ridge_cv


def test_ridge_matches_sklearn_per_group_alpha():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(60, 7)), rng.normal(size=(60, 5))
    groups = np.array([0, 0, 1, 1, 1])
    r = ridge_cv([X], Y, groups=groups, alphas=(0.5, 8.0))
    for g in (0, 1):
        cols = groups == g
        sk = SkRidge(alpha=r.alpha[g]).fit(X, Y[:, cols])
        np.testing.assert_allclose(r.predict(X)[:, cols], sk.predict(X), atol=1e-8)
    # copies with the same targets = the stacked design (what the augmented protocol fits)
    X2 = rng.normal(size=(60, 7))
    r2 = ridge_cv([X, X2], Y, alphas=(2.0,))
    sk = SkRidge(alpha=2.0).fit(np.vstack([X, X2]), np.vstack([Y, Y]))
    np.testing.assert_allclose(r2.predict(X2), sk.predict(X2), atol=1e-8)


def _planted(n, seed):
    """T is a linear function of H's sensors only: T's own sensors are noise; the oracle must find H."""
    rng = np.random.default_rng(seed)
    G, N = 6, 4
    h = rng.normal(size=(n, N))
    A = np.random.default_rng(99).normal(size=(N, G))
    T = h @ A / 2
    vals = np.stack(
        [rng.normal(size=(n, N)), h], 1
    )  # [n, M=2, N]: T sensors unrelated, H sensors informative
    tgt = np.stack([T, rng.normal(size=(n, G))], 1)[:, None]  # [n, 1, M, G]
    return SensorData(
        values=torch.tensor(vals, dtype=torch.float32),
        coords=torch.rand(2, N, 2),
        targets=torch.tensor(tgt, dtype=torch.float32),
        grid=torch.rand(G, 2),
        modalities=("T", "H"),
        horizons=(0,),
        mean=np.zeros(2),
        std=np.ones(2),
    )


def test_oracle_finds_planted_cross_modal_information():
    sd, st = _planted(300, 0), _planted(100, 1)
    t_only = oracle_mse(fit_oracle(sd, inputs=("T",)), st, inputs=("T",))
    both = oracle_mse(fit_oracle(sd, inputs=("T", "H")), st)
    assert np.sqrt(t_only[:, 0].mean()) > 0.9 * np.sqrt((st.targets[:, 0, 0].numpy() ** 2).mean())
    assert np.sqrt(both[:, 0].mean()) < 0.1
    assert features(np.ones((1, 2, 3)), np.array([[True, False]])).tolist() == [[1, 1, 1, 0, 0, 0, 1, 0]]
