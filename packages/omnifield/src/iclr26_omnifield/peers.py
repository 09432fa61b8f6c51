"""Peer libraries on the same sensors, z-scoring and grid queries as OmniField (reference rows, no verdict).

- pykrige: ordinary kriging (spherical variogram, fitted per sample) of each modality at horizon 0.
- neuraloperator: an FNO trained to map the IDW-gridded sensors of every modality at t = 0 (plus the sensor
  masks) to every modality at every horizon — the paper's "Interpolation" strategy.
- perceiver-pytorch: a Perceiver IO field on T alone (tokens [u; γ(x)], queries [γ(x); γ_t(τ)]) — the
  single-modality CNF ("SCENT-like") baseline of the spec; its RMSE_T sits beside OmniField's on {T} and {T,H,W}.

Each returns per-sample MSEs in z-units, shaped like `experiment.evaluate`'s ([n, M, H] or [n, M]).
"""

from __future__ import annotations

from importlib.util import find_spec

import numpy as np

PEERS = {"pykrige": "pykrige", "neuraloperator": "neuralop", "perceiver-pytorch": "perceiver_pytorch"}


def installed() -> list[str]:
    return [d for d, mod in PEERS.items() if find_spec(mod) is not None]


def kriging_mse(sd) -> np.ndarray:
    """Per-sample MSE [n, M] of pykrige's OrdinaryKriging at horizon 0 on the full grid."""
    import warnings

    from pykrige.ok import OrdinaryKriging

    vals, coords, grid = sd.values.numpy(), sd.coords.numpy(), sd.grid.numpy().astype(float)
    y0 = sd.targets[:, 0].numpy()
    n, M, _ = vals.shape
    out = np.zeros((n, M))
    for s in range(n):
        for i in range(M):
            x = coords[i].astype(float)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ok = OrdinaryKriging(x[:, 0], x[:, 1], vals[s, i].astype(float), variogram_model="spherical")
                p, _ss = ok.execute("points", grid[:, 0], grid[:, 1])
            out[s, i] = ((np.asarray(p) - y0[s, i]) ** 2).mean()
    return out


def _idw_images(sd) -> np.ndarray:
    """[n, 2M, g, g]: IDW of each modality's sensors onto the grid, then each modality's sensor mask."""
    from .baselines import periodic_dist

    vals, coords, grid = sd.values.numpy(), sd.coords.numpy(), sd.grid.numpy()
    n, M, _ = vals.shape
    g = round(np.sqrt(grid.shape[0]))
    out = np.zeros((n, 2 * M, g, g), dtype=np.float32)
    for i in range(M):
        w = 1.0 / np.maximum(periodic_dist(grid, coords[i]), 1e-12) ** 2  # [G, N]
        w = w / w.sum(1, keepdims=True)
        out[:, i] = (vals[:, i] @ w.T).reshape(n, g, g)
        d = periodic_dist(grid, coords[i]).min(1)
        out[:, M + i] = (d < 1e-9).reshape(g, g)
    return out


def _train(model, loss_fn, n: int, t: dict, seed: int, desc: str):
    """The same AdamW / warm-up + cosine / clip loop (the core's) as OmniField's arms, on sample indices."""
    from iclr26_core.train import train_lm

    from .experiment import train_lm_config

    cfg = train_lm_config(t, seed, desc, progress=False)

    def batches(step: int):
        import torch

        return torch.tensor(np.random.default_rng([seed, step, 7]).integers(0, n, cfg.batch_size))

    return train_lm(model, None, cfg=cfg, batches=batches, loss_fn=loss_fn)


def fno_mse(sd, st, t: dict, seed: int, modes: int = 8, width: int = 16) -> np.ndarray:
    """Per-sample MSE [n, M, H] of neuraloperator's FNO on IDW-gridded inputs (all modalities in)."""
    import torch
    from neuralop.models import FNO

    torch.manual_seed(seed)
    n, M, H = sd.values.shape[0], sd.values.shape[1], len(sd.horizons)
    g = round(np.sqrt(sd.grid.shape[0]))
    xtr, xte = torch.tensor(_idw_images(sd)), torch.tensor(_idw_images(st))
    ytr = sd.targets.permute(0, 2, 1, 3).reshape(n, M * H, g, g)  # [n, M·H, g, g]
    model = FNO(
        n_modes=(modes, modes), in_channels=2 * M, out_channels=M * H, hidden_channels=width, n_layers=4
    )

    def loss_fn(m, idx):
        return ((m(xtr[idx]) - ytr[idx]) ** 2).mean()

    _train(model, loss_fn, n, t, seed, "fno")
    model.eval()
    with torch.no_grad():
        pred = model(xte).reshape(-1, M, H, g * g)
    y = st.targets.permute(0, 2, 1, 3)  # [n, M, H, G]
    return ((pred - y) ** 2).mean(-1).numpy()


def perceiver_mse(sd, st, mcfg: dict, t: dict, seed: int, queries: int = 256) -> np.ndarray:
    """Per-sample MSE [n, H] of T from a perceiver-pytorch Perceiver IO field trained on T's sensors alone."""
    import torch
    from perceiver_pytorch import PerceiverIO

    from .gff import GaussianFourierFeatures

    torch.manual_seed(seed)
    (ns, sig_s), (nt, sig_t) = mcfg["gff_space"], mcfg["gff_time"]
    gx = GaussianFourierFeatures(2, int(ns), float(sig_s), bool(mcfg["two_pi"]), seed=0)
    gt = GaussianFourierFeatures(1, int(nt), float(sig_t), bool(mcfg["two_pi"]), seed=1)
    d, heads, dh = int(mcfg["d_latent"]), int(mcfg["cross_heads"]), int(mcfg["dim_head"])
    model = PerceiverIO(
        depth=int(mcfg["stages"]),
        dim=1 + gx.out_dim,
        queries_dim=gx.out_dim + gt.out_dim,
        logits_dim=1,
        num_latents=int(mcfg["n_latents"]),
        latent_dim=d,
        cross_heads=heads,
        latent_heads=int(mcfg["self_heads"]),
        cross_dim_head=dh,
        latent_dim_head=dh,
    )
    G, H = sd.grid.shape[0], len(sd.horizons)
    hmax = max(max(sd.horizons), 1)
    hz = torch.tensor(sd.horizons, dtype=torch.float32) / hmax

    def tokens(vals):  # vals [b, N] of T
        c = sd.coords[0]
        return torch.cat([vals[..., None], gx(c).expand(vals.shape[0], -1, -1)], dim=-1)

    def qfeat(qc, tau):
        return torch.cat([gx(qc), gt(tau[..., None])], dim=-1)

    def loss_fn(m, idx):
        rng = np.random.default_rng(int(idx.sum()) + seed)
        q = torch.tensor(rng.integers(0, G, (len(idx), queries)))
        h = torch.tensor(rng.integers(0, H, (len(idx), queries)))
        pred = m(tokens(sd.values[idx, 0]), queries=qfeat(sd.grid[q], hz[h])).squeeze(-1)
        y = sd.targets[idx[:, None], h, 0, q]
        return ((pred - y) ** 2).mean()

    _train(model, loss_fn, sd.values.shape[0], t, seed, "perceiver")
    model.eval()
    qc = sd.grid.repeat(H, 1)
    tau = hz.repeat_interleave(G)
    out = np.zeros((st.values.shape[0], H))
    with torch.no_grad():
        for s in range(0, st.values.shape[0], 4):
            v = st.values[s : s + 4, 0]
            b = v.shape[0]
            p = model(tokens(v), queries=qfeat(qc, tau)[None].expand(b, -1, -1)).squeeze(-1).view(b, H, G)
            out[s : s + b] = ((p - st.targets[s : s + b, :, 0]) ** 2).mean(-1).numpy()
    return out
