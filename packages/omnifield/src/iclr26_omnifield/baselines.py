"""Interpolation baselines per modality at horizon 0, on the same sensors, z-scoring and grid queries:
inverse-distance weighting (periodic distance), scikit-learn's GaussianProcessRegressor (RBF + white noise)
and KNeighborsRegressor. Each sees only its own modality's sensors (no cross-modal information)."""

from __future__ import annotations

import numpy as np


def periodic_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise distances on the unit torus: a [P, 2], b [Q, 2] → [P, Q]."""
    d = np.abs(a[:, None, :] - b[None, :, :])
    d = np.minimum(d, 1.0 - d)
    return np.sqrt((d**2).sum(-1))


def idw(coords: np.ndarray, values: np.ndarray, queries: np.ndarray, power: float = 2.0) -> np.ndarray:
    """Σ w_i u_i / Σ w_i with w_i = 1/d_i^power; a query on a sensor gets its value."""
    d = periodic_dist(queries, coords)
    w = 1.0 / np.maximum(d, 1e-12) ** power
    return (w * values[None, :]).sum(1) / w.sum(1)


def _torus_features(x: np.ndarray) -> np.ndarray:
    """Embed the periodic square in R⁴ (cos, sin per axis) so an RBF kernel respects periodicity."""
    return np.concatenate([np.cos(2 * np.pi * x), np.sin(2 * np.pi * x)], axis=1) / (2 * np.pi)


def gp_fit_kernel(coords: np.ndarray, values: np.ndarray, n_fit: int = 5, seed: int = 0):
    """Fit RBF + white-noise hyper-parameters on the first ``n_fit`` samples (values [n, N]); returns the kernel."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel(1.0) * RBF(0.1) + WhiteKernel(0.01)
    X = _torus_features(coords)
    thetas = []
    for i in range(min(n_fit, len(values))):
        gp = GaussianProcessRegressor(kernel, normalize_y=False, random_state=seed).fit(X, values[i])
        thetas.append(gp.kernel_.theta)
    return kernel.clone_with_theta(np.mean(thetas, axis=0))


def gp_predict(kernel, coords: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    from sklearn.gaussian_process import GaussianProcessRegressor

    gp = GaussianProcessRegressor(kernel, optimizer=None).fit(_torus_features(coords), values)
    return gp.predict(_torus_features(queries))


def knn_predict(coords: np.ndarray, values: np.ndarray, queries: np.ndarray, k: int = 5) -> np.ndarray:
    from sklearn.neighbors import KNeighborsRegressor

    X, Q = _torus_features(coords), _torus_features(queries)
    return KNeighborsRegressor(n_neighbors=k, weights="distance").fit(X, values).predict(Q)


def baseline_mse(sd, methods=("idw", "gp", "knn"), n_fit: int = 5) -> dict[str, np.ndarray]:
    """Per-sample MSE [n, M] at horizon 0 (z-units) of each baseline on `SensorData` ``sd``."""
    vals = sd.values.numpy()
    coords = sd.coords.numpy()
    grid = sd.grid.numpy()
    y0 = sd.targets[:, 0].numpy()  # [n, M, G]
    n, M, _ = vals.shape
    out = {k: np.zeros((n, M)) for k in methods}
    kernels = {i: gp_fit_kernel(coords[i], vals[:, i], n_fit) for i in range(M)} if "gp" in methods else {}
    for s in range(n):
        for i in range(M):
            for name in methods:
                if name == "idw":
                    p = idw(coords[i], vals[s, i], grid)
                elif name == "gp":
                    p = gp_predict(kernels[i], coords[i], vals[s, i], grid)
                else:
                    p = knn_predict(coords[i], vals[s, i], grid)
                out[name][s, i] = ((p - y0[s, i]) ** 2).mean()
    return out
