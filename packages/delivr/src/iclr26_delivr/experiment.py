"""Building blocks of the miniature experiments: build, train and evaluate DeLiVR on synthetic rainy clips."""

from __future__ import annotations

import numpy as np
import torch

from .config import DeLiVRConfig
from .loss import LossWeights, frame_metrics
from .model import DeLiVR
from .train import TrainLog, TrainSettings, train_delivr

ABLATION = {"spatial_bias": False, "temporal_bias": False, "decay": False}  # the band mask is kept (spec C3)
# The oracle for the head's angles: θ_t = ORACLE_SIGN·φ_t, where φ_t is the generator's counter-clockwise-as-displayed
# rotation of frame t. In y-down image coordinates that content rotation is −φ_t, and the spec's oracle is minus the
# content rotation (−(−φ_t)), so the sign is +1; the convention test (tests/test_delivr_model.py) checks it on the
# generator's own sampling grid: this sign maximises the bias at corresponding tokens, the opposite one does not.
ORACLE_SIGN = 1.0


def make_model(model_cfg: dict, *, ablation: bool = False, seed: int = 0) -> DeLiVR:
    """A randomly initialised DeLiVR (same weights for the same seed, with or without the Lie biases)."""
    torch.manual_seed(seed)
    return DeLiVR(DeLiVRConfig(**{**model_cfg, **(ABLATION if ablation else {})}))


def train_settings(
    cfg, seed: int, desc: str, device: str, position: int | None = None, eval_every: int | None = None
) -> TrainSettings:
    """`TrainSettings` of a composed reproduce config: ``train.*`` with ``steps`` (the top-level key)."""
    extra = {} if eval_every is None else {"eval_every": eval_every}
    return TrainSettings.from_config(
        cfg.train, steps=int(cfg.steps), seed=seed, device=device, desc=desc, position=position, **extra
    )


def psnr_uint8(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image PSNR (dB) on RGB uint8 levels (clamp, ×255, round; data_range 255): [N, 3, H, W] -> [N]."""
    p = torch.round(pred.clamp(0, 1) * 255).double()
    t = torch.round(target.clamp(0, 1) * 255).double()
    mse = ((p - t) ** 2).flatten(1).mean(1)
    return 10 * torch.log10(255.0**2 / mse.clamp_min(1e-12))


def oracle_angles(phi_deg: torch.Tensor) -> torch.Tensor:
    """The oracle arm's θ_t (radians, float32) from the generator's φ_t (degrees): ORACLE_SIGN·φ_t."""
    return torch.deg2rad(ORACLE_SIGN * phi_deg.double()).float()


@torch.no_grad()
def predict(
    model: DeLiVR, rainy: torch.Tensor, batch: int = 16, angles: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Restored centre frames [N, 3, H, W] and θ [N, T] (radians) for clips [N, T, 3, H, W]; ``angles`` [N, T]
    (radians) replace the angle head's (the oracle arm)."""
    model.eval()
    device = next(model.parameters()).device
    outs, thetas = [], []
    for i in range(0, len(rainy), batch):
        given = None if angles is None else angles[i : i + batch]
        o = model(rainy[i : i + batch].to(device), angles=given)
        outs.append(o.restored.float().cpu())
        thetas.append(o.theta.float().cpu())
    return torch.cat(outs), torch.cat(thetas)


def fit(
    model: DeLiVR,
    rainy: torch.Tensor,
    clean_centre: torch.Tensor,
    settings: TrainSettings,
    val: tuple[torch.Tensor, torch.Tensor] | None = None,
    weights: LossWeights | None = None,
    angles: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[DeLiVR, TrainLog]:
    """Train on in-memory clips (seeded epochs of random batches); ``val`` = (rainy, clean centre) for the curve;
    ``angles`` = (training angles [N, T], validation angles) in radians for the oracle arm (else the head's)."""
    from iclr26_core.train import batch_indices

    n = len(rainy)

    def sample(step: int):
        idx = batch_indices(n, settings.batch_size, step, settings.seed)
        if angles is not None:
            return rainy[idx], clean_centre[idx], angles[0][idx]
        return rainy[idx], clean_centre[idx]

    def evaluate(m) -> float:
        restored, _ = predict(m, val[0], angles=None if angles is None else angles[1])
        return float(psnr_uint8(restored, val[1]).mean())

    return train_delivr(
        model, sample, settings, evaluate=evaluate if val is not None else None, weights=weights
    )


def temporal_median(rainy: torch.Tensor) -> torch.Tensor:
    """The classical baseline: the per-pixel median of the T frames, [N, T, 3, H, W] -> [N, 3, H, W]."""
    return rainy.median(dim=1).values


def image_metrics(pred: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Mean PSNR/SSIM (RGB and Y, uint8 convention) over images [N, 3, H, W]."""
    rows = [frame_metrics(p, t) for p, t in zip(pred, target, strict=True)]
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def relative_angles(theta: torch.Tensor, phi_deg: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Pooled (predicted θ_t − θ_c, oracle sign·(φ_t − φ_c)) in degrees over clips and t ≠ c."""
    t = theta.shape[1]
    c = (t - 1) // 2
    keep = [i for i in range(t) if i != c]
    pred = torch.rad2deg(theta[:, keep] - theta[:, c : c + 1]).double()
    true = ORACLE_SIGN * (phi_deg[:, keep] - phi_deg[:, c : c + 1]).double()
    return pred.flatten().numpy(), true.flatten().numpy()


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ; 0.0 when either side is constant (a head that never moved has no rank order)."""
    from scipy.stats import spearmanr

    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(spearmanr(x, y).statistic)
