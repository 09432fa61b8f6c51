"""The headroom oracle: ridge regression from the sensors' values to every target on the full grid.

Features of a sample: the z-scored values of the kept input modalities' sensors (zeros where a modality is
dropped) followed by one keep indicator per modality — [M·N + M]; targets: every modality on the full grid at
every horizon, [H·M·G], the same targets as `experiment.evaluate`. The ridge is fitted in closed form from
XᵀX and XᵀY (the training protocol's random input subsets and noise draw ``copies`` augmented copies of each
training sample; Y is the same for every copy), its α chosen per target modality on the last 20 % of the
training samples from a log grid, then refitted on all of them. The best *linear* predictor of a target from the sensors is a lower
bound on what the field can reach from the same inputs (H = tanh(1.5 S) and W = ‖∇S‖ are nonlinear in S:
a nonlinear model can do better), so a gap between input sets here is information that exists in the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALPHAS = tuple(10.0 ** np.arange(-3.0, 4.01, 0.5))


def features(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """values [n, M, N], keep [n, M] (bool) → [n, M·N + M]: kept values (0 where dropped), then keep."""
    n = values.shape[0]
    v = np.where(keep[:, :, None], np.nan_to_num(values), 0.0)
    return np.concatenate([v.reshape(n, -1), keep.astype(float)], axis=1)


@dataclass
class Ridge:
    """ŷ = (x − x̄) W + ȳ, each column block g of W = (XcᵀXc + α_g I)⁻¹ XcᵀYc[:, g]."""

    W: np.ndarray
    x_mean: np.ndarray
    y_mean: np.ndarray
    alpha: list[float]

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_mean) @ self.W + self.y_mean


def _moments(Xs: list[np.ndarray], Y: np.ndarray):
    """Centred XᵀX and XᵀY over the copies Xs (each [n, p], rows aligned with Y [n, q])."""
    k, n = len(Xs), Y.shape[0]
    x_mean = sum(X.sum(0) for X in Xs) / (k * n)
    y_mean = Y.mean(0)
    xtx = sum(X.T @ X for X in Xs) - k * n * np.outer(x_mean, x_mean)
    xty = sum(X.T for X in Xs) @ Y - k * n * np.outer(x_mean, y_mean)
    return xtx, xty, x_mean, y_mean


def _solve(xtx: np.ndarray, xty: np.ndarray, alphas: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """W with α = ``alphas[g]`` for the columns of group g (eigendecomposition of XᵀX, one per call)."""
    lam, V = np.linalg.eigh(xtx)
    proj = V.T @ xty
    W = np.empty_like(xty)
    for g in np.unique(groups):
        cols = groups == g
        W[:, cols] = V @ (proj[:, cols] / (lam + alphas[g])[:, None])
    return W


def ridge_cv(Xs: list[np.ndarray], Y: np.ndarray, groups=None, alphas=ALPHAS, holdout: float = 0.2) -> Ridge:
    """Ridge of Y on the stacked copies Xs (the same Y for each copy), intercept unpenalised; α per column group
    (``groups`` [q] ints, default one group) from the grid ``alphas`` by the validation MSE on the last
    ``holdout`` of the samples, then refitted on all of them."""
    n, q = Y.shape
    groups = np.zeros(q, int) if groups is None else np.asarray(groups)
    n_groups = int(groups.max()) + 1
    cut = round(n * (1 - holdout))
    best = np.full(n_groups, float(np.median(alphas)))
    if 0 < cut < n:
        xtx, xty, xm, ym = _moments([X[:cut] for X in Xs], Y[:cut])
        errs = []
        for a in alphas:
            W = _solve(xtx, xty, np.full(n_groups, a), groups)
            sq = np.mean([(((X[cut:] - xm) @ W + ym - Y[cut:]) ** 2).mean(0) for X in Xs], axis=0)
            errs.append([sq[groups == g].mean() for g in range(n_groups)])
        best = np.asarray(alphas)[np.argmin(np.array(errs), axis=0)]
    xtx, xty, xm, ym = _moments(Xs, Y)
    return Ridge(_solve(xtx, xty, best, groups), xm, ym, best.tolist())


def fit_oracle(
    sd,
    inputs=None,
    subset: str = "all",
    noise: dict | None = None,
    subset_p: float = 0.7,
    copies: int = 1,
    seed: int = 0,
) -> Ridge:
    """Fit the ridge on `SensorData` ``sd``: with ``inputs`` (a fixed input set, no augmentation), or with the
    training protocol (``subset`` "all"/"flex", ``noise``) drawn ``copies`` times by `experiment.draw_inputs`."""
    from .experiment import draw_inputs

    vals = sd.values
    n, M, _ = vals.shape
    Y = sd.targets.numpy().reshape(n, -1).astype(np.float64)
    if inputs is not None:
        keep = np.tile(np.array([m in inputs for m in sd.modalities]), (n, 1))
        Xs = [features(vals.numpy(), keep)]
    else:
        rng = np.random.default_rng([seed, 977])
        Xs = []
        for _ in range(copies):
            v, mask = draw_inputs(rng, vals, subset, subset_p, noise or {})
            Xs.append(features(v.numpy(), mask[:, :, 0].numpy()))
    H, G = sd.targets.shape[1], sd.targets.shape[3]
    return ridge_cv(Xs, Y, groups=np.tile(np.repeat(np.arange(M), G), H))  # α per target modality


def oracle_mse(ridge: Ridge, st, inputs=None, noisy=(), sigma: float = 0.0, seed: int = 0) -> np.ndarray:
    """Per-sample MSE [n, M, H] of ``ridge`` on the test data ``st``, with the inputs and test noise of
    `experiment.evaluate` (same seed → the same noise draw as the field's evaluation)."""
    from .experiment import test_inputs

    inputs = list(st.modalities if inputs is None else inputs)
    vals, keep = test_inputs(st, inputs, noisy, sigma, seed)
    n, M, _ = vals.shape
    X = features(vals.numpy(), np.tile(keep.numpy(), (n, 1)))
    H, G = st.targets.shape[1], st.targets.shape[3]
    pred = ridge.predict(X).reshape(n, H, M, G)
    return ((pred - st.targets.numpy()) ** 2).mean(-1).transpose(0, 2, 1)


def _rm(x: np.ndarray, i: int | None = None) -> float:
    return float(np.sqrt((x if i is None else x[:, i]).mean()))


def headroom(sd, st, c: dict) -> dict:
    """Each claim's headroom on the same sensors, targets and test noise, before any training (pure numpy).

    - C1: 1 / oracle z-RMSE over all modalities from all inputs — the ratio RMSE(no GFF)/RMSE(GFF) that a
      no-GFF field stuck at the mean (z-RMSE 1) would give against a field as good as the oracle.
    - C2: RMSE_T({T,H,W}) / RMSE_T({T}), one ridge per input set: the information the other modalities add.
    - C3: the fusion gain, per test sample z-RMSE of "separate" (each modality from its own sensors, no fusion)
      minus "joint" (every modality from all sensors) and its paired-bootstrap SE: the room fusion has to matter.
    - C4: T's ratio RMSE(σ)/RMSE(0) with test noise σ = max sigma on the other modalities, for a ridge trained on
      clean inputs minus one trained with the protocol's noise (and random subsets): how much a fuser that has not
      learned to discount noisy inputs loses against one that has.
    - C5: mean RMSE over the proper input subsets of a ridge trained with random subsets over one trained on all
      inputs (missing modalities zero-filled in both).
    """
    from .runs import proper_subsets

    mods = st.modalities
    d, ev = c["data"], c["eval"]
    noise, p = dict(d["noise"]), float(c["train"].get("subset_p", 0.7))
    single = {m: fit_oracle(sd, inputs=(m,)) for m in mods}
    joint = fit_oracle(sd, inputs=mods)
    e_joint = oracle_mse(joint, st)
    e_T = oracle_mse(single[mods[0]], st, inputs=(mods[0],))
    sep = np.stack([oracle_mse(single[m], st, inputs=(m,))[:, i] for i, m in enumerate(mods)], 1)
    delta = np.sqrt(sep.mean((1, 2))) - np.sqrt(e_joint.mean((1, 2)))
    rng = np.random.default_rng(0)
    boot = rng.integers(0, len(delta), (int(ev["bootstrap"]), len(delta)))
    se = float(delta[boot].mean(1).std(ddof=1)) if len(delta) > 1 else float("inf")
    sigma, others = float(ev["sigmas"][-1]), [m for m in mods if m != mods[0]]
    aug = fit_oracle(sd, subset="flex", noise=noise, subset_p=p, copies=8)
    flex = fit_oracle(sd, subset="flex", subset_p=p, copies=8)

    def noise_ratio(r: Ridge) -> float:
        noisy = oracle_mse(r, st, noisy=others, sigma=sigma, seed=int(c.get("seed", 0)) + 7)  # seed 0's
        return _rm(noisy, 0) / _rm(oracle_mse(r, st), 0)

    subsets = proper_subsets(mods)
    sub_mean = lambda r: float(np.mean([_rm(oracle_mse(r, st, inputs=s)) for s in subsets]))  # noqa: E731
    out = {
        "C1": {"oracle_all": _rm(e_joint), "mean_over_oracle": 1.0 / _rm(e_joint)},
        "C2": {
            "T_from_T": _rm(e_T, 0),
            "T_from_all": _rm(e_joint, 0),
            "ratio": _rm(e_joint, 0) / _rm(e_T, 0),
        },
        "C3": {"separate": _rm(sep), "joint": _rm(e_joint), "delta": float(delta.mean()), "se": se},
        "C4": {"ratio_clean": noise_ratio(joint), "ratio_noise_trained": noise_ratio(aug)},
        "C5": {"flex": sub_mean(flex), "all": sub_mean(joint)},
    }
    out["C4"]["gap"] = out["C4"]["ratio_clean"] - out["C4"]["ratio_noise_trained"]
    out["C5"]["ratio"] = out["C5"]["flex"] / out["C5"]["all"]
    out["testable"] = {
        "C1": out["C1"]["mean_over_oracle"] >= 1.2,
        "C2": out["C2"]["ratio"] <= 0.95,
        "C3": out["C3"]["delta"] > 2 * se,
        "C4": out["C4"]["gap"] >= 0.05,
        "C5": out["C5"]["ratio"] <= 0.95,
    }
    out["alpha"] = {"joint": joint.alpha, "T": single[mods[0]].alpha}
    return out
