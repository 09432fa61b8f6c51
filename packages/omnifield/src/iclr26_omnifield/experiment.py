"""The miniature experiment: sensors on synthetic fields, fleximodal training with the core's accelerate loop,
full-grid evaluation per input subset and test-time noise.

Inputs are the sensors' values at t = 0 (observation noise N(0, 0.05²), z-scored with training statistics);
targets are every modality on the full grid at horizons h ∈ ``horizons`` (τ = h / max h).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .data import FieldData, sensor_partition
from .model import OmniField, SensorSet, fleximodal_loss


@dataclass
class SensorData:
    """values [n, M, N] (z-units) at sensor coords [M, N, 2]; targets [n, H, M, G] (z-units) at grid [G, 2]."""

    values: torch.Tensor
    coords: torch.Tensor
    targets: torch.Tensor
    grid: torch.Tensor
    modalities: tuple[str, ...]
    horizons: tuple[int, ...]
    mean: np.ndarray
    std: np.ndarray


def make_sensor_data(data: FieldData, fraction: float, obs_noise: float, seed: int, stats=None) -> SensorData:
    """Sample ``data`` at the Venn sensors of ``sensor_partition(g·g, fraction=fraction)`` (seed 123)."""
    n, H, M, g, _ = data.fields.shape
    flat = data.fields.reshape(n, H, M, g * g)
    mean, std = stats if stats is not None else (flat.mean(axis=(0, 1, 3)), flat.std(axis=(0, 1, 3)))
    z = (flat - mean[None, None, :, None]) / std[None, None, :, None]
    part = sensor_partition(g * g, 3, fraction=fraction, seed=123, names=data.modalities)
    idx = np.stack([part[m] for m in data.modalities])  # [M, N]
    rng = np.random.default_rng(seed)
    raw = np.stack([flat[:, 0, i, idx[i]] for i in range(M)], axis=1)  # [n, M, N]
    raw = raw + rng.normal(0, obs_noise, raw.shape)
    vals = (raw - mean[None, :, None]) / std[None, :, None]
    coords = data.coords[idx]  # [M, N, 2]
    hsel = list(data.horizons)
    return SensorData(
        values=torch.tensor(vals, dtype=torch.float32),
        coords=torch.tensor(coords, dtype=torch.float32),
        targets=torch.tensor(z[:, hsel], dtype=torch.float32),
        grid=torch.tensor(data.coords, dtype=torch.float32),
        modalities=tuple(data.modalities),
        horizons=tuple(data.horizons),
        mean=mean,
        std=std,
    )


def sensor_sets(sd: SensorData, values: torch.Tensor, mask: torch.Tensor) -> dict[str, SensorSet]:
    b = values.shape[0]
    return {
        m: SensorSet(sd.coords[i].expand(b, -1, -1), values[:, i], mask[:, i])
        for i, m in enumerate(sd.modalities)
    }


def draw_inputs(rng: np.random.Generator, values: torch.Tensor, subset: str, subset_p: float, noise: dict):
    """The training protocol's inputs for values [B, M, N]: (noisy values, keep mask [B, M, N]).

    subset="flex": keep each input modality with p = ``subset_p`` (at least one); "all": every modality.
    noise: with p = noise.p pick 1–2 input modalities of a sample and add N(0, σ²), σ drawn from noise.sigmas.
    """
    batch, M, N = values.shape
    vals = values.clone()
    keep = np.ones((batch, M), bool)
    if subset == "flex":
        keep = rng.random((batch, M)) < subset_p
        for b in np.where(~keep.any(1))[0]:
            keep[b, rng.integers(M)] = True
    if noise and noise.get("p", 0) > 0:
        for b in range(batch):
            if rng.random() < noise["p"]:
                ms = rng.choice(M, size=rng.integers(1, 3), replace=False)
                sig = float(rng.choice(noise["sigmas"]))
                vals[b, ms] += torch.tensor(rng.normal(0, sig, (len(ms), N)), dtype=torch.float32)
    return vals, torch.tensor(np.repeat(keep[:, :, None], N, axis=2))


def make_batches(
    sd: SensorData, batch: int, targets: int, subset: str, subset_p: float, noise: dict, seed: int
):
    """``batches(step)`` for `iclr26_core.train.train_lm`: a pure function of (seed, step).

    subset="flex": keep each input modality with p = ``subset_p`` (at least one); "all": every modality.
    noise: with p = noise.p pick 1–2 input modalities and add N(0, σ²), σ drawn from noise.sigmas.
    Each sample supervises ``targets`` random (point, horizon) pairs in every modality.
    """
    n = sd.values.shape[0]
    G, H = sd.grid.shape[0], len(sd.horizons)
    hmax = max(max(sd.horizons), 1)

    def batches(step: int):
        rng = np.random.default_rng([seed, step])
        idx = rng.integers(0, n, batch)
        vals, mask = draw_inputs(rng, sd.values[idx], subset, subset_p, noise)
        q = rng.integers(0, G, (batch, targets))
        h = rng.integers(0, H, (batch, targets))
        qc = sd.grid[q]
        tau = torch.tensor(np.array(sd.horizons)[h] / hmax, dtype=torch.float32)
        y = sd.targets[idx[:, None], h, :, q]  # [B, Q, M]
        return vals, mask, qc, tau, y.permute(0, 2, 1).contiguous()

    return batches


def make_loss(sd: SensorData):
    def loss_fn(model, batch):
        vals, mask, qc, tau, y = batch
        pred = model(sensor_sets(sd, vals, mask), qc, tau)
        ones = torch.ones(vals.shape[0], dtype=torch.bool)
        return fleximodal_loss(
            pred, {m: y[:, i] for i, m in enumerate(sd.modalities)}, {m: ones for m in sd.modalities}
        )

    return loss_fn


def train_lm_config(
    t: dict, seed: int, desc: str = "train", position: int | None = None, progress: bool = True
):
    """The core's `TrainConfig` from ``train.*`` (steps, lr, weight_decay, min_lr_ratio as they are; ``batch`` and
    the warm-up fraction converted): AdamW (0.9, 0.999), warm-up + cosine, clip 1.0."""
    from iclr26_core.train import TrainConfig

    return TrainConfig.from_section(
        {"weight_decay": 1e-4, "min_lr_ratio": 0.1, **t, "steps": int(t["steps"]), "lr": float(t["lr"])},
        batch_size=int(t["batch"]),
        betas=(0.9, 0.999),
        warmup_steps=round(float(t.get("warmup", 0.1)) * int(t["steps"])),
        grad_clip=1.0,
        adamw_impl="foreach",  # multi-tensor AdamW: same arithmetic, ≈ 10 % faster per step here
        seed=seed,
        device="cpu",
        desc=desc,
        position=position,
        progress=progress,
    )


def train_field(
    model: OmniField,
    sd: SensorData,
    t: dict,
    subset: str,
    noise: dict,
    seed: int,
    desc: str = "train",
    position: int | None = None,
    progress: bool = True,
    fixed_batch: bool = False,
):
    """Train with `iclr26_core.train.train_lm` on fleximodal batches (`make_batches`); ``fixed_batch``: the
    batch of step 0 at every step (the single-batch overfit test of `pilot`)."""
    from iclr26_core.train import train_lm

    cfg = train_lm_config(t, seed, desc, position, progress)
    batches = make_batches(
        sd, cfg.batch_size, int(t["targets"]), subset, float(t.get("subset_p", 0.7)), noise, seed
    )
    if fixed_batch:
        first = batches(0)
        batches = lambda step: first  # noqa: E731
    # the core's AdamW (TrainConfig.adamw_impl: the multi-tensor "foreach" update by default)
    return train_lm(model, None, cfg=cfg, batches=batches, loss_fn=make_loss(sd))


def test_inputs(sd: SensorData, inputs, noisy=(), sigma: float = 0.0, seed: int = 0):
    """The evaluation inputs: values [n, M, N] with N(0, σ²) added to the modalities in ``noisy`` (seeded), and
    keep [M] (True for the modalities in ``inputs``) — shared by `evaluate` and the oracle (`oracle.py`)."""
    n, _, N = sd.values.shape
    keep = torch.tensor([m in inputs for m in sd.modalities])
    vals = sd.values.clone()
    if sigma > 0 and noisy:
        g = torch.Generator().manual_seed(seed)
        for i, m in enumerate(sd.modalities):
            if m in noisy:
                vals[:, i] += sigma * torch.randn(n, N, generator=g)
    return vals, keep


@torch.no_grad()
def evaluate(
    model: OmniField,
    sd: SensorData,
    inputs=None,
    noisy=(),
    sigma: float = 0.0,
    seed: int = 0,
    batch: int = 4,
    chunk: int = 4096,
) -> np.ndarray:
    """Per-sample MSE [n, M, H] (z-units) on the full grid at every horizon, given input modalities ``inputs``
    (default all) with N(0, σ²) added to the modalities in ``noisy``."""
    model.eval()
    n, M, N = sd.values.shape
    G, H = sd.grid.shape[0], len(sd.horizons)
    hmax = max(max(sd.horizons), 1)
    inputs = list(sd.modalities if inputs is None else inputs)
    vals, keep = test_inputs(sd, inputs, noisy, sigma, seed)
    qc_all = sd.grid.repeat(H, 1)  # [H·G, 2]
    tau_all = torch.tensor(np.repeat(np.array(sd.horizons) / hmax, G), dtype=torch.float32)
    out = np.zeros((n, M, H))
    for s in range(0, n, batch):
        v = vals[s : s + batch]
        b = v.shape[0]
        mask = keep[None, :, None].expand(b, M, N)
        sets = {m: st for m, st in sensor_sets(sd, v, mask).items() if m in inputs}
        preds = []
        for c in range(0, qc_all.shape[0], chunk):
            qc = qc_all[c : c + chunk].expand(b, -1, -1)
            tau = tau_all[c : c + chunk].expand(b, -1)
            p = model(sets, qc, tau)
            preds.append(torch.stack([p[m] for m in sd.modalities], 1))
        pred = torch.cat(preds, -1).view(b, M, H, G)
        y = sd.targets[s : s + batch].permute(0, 2, 1, 3)  # [b, M, H, G]
        out[s : s + b] = ((pred - y) ** 2).mean(-1).numpy()
    return out


def rmse(mse: np.ndarray, modality: int | None = None) -> float:
    """RMSE from per-sample MSEs [n, M, H] (all modalities, or one)."""
    sel = mse if modality is None else mse[:, modality]
    return float(np.sqrt(sel.mean()))
