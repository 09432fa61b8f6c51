"""DeLiVR's training objective (spec Method 10) and the image metrics of the evaluation (Method 12).

L = 1.0·Charb + 0.05·Edge + 0.05·(1 − SSIM_g) + 0.05·FFT + 1e-3·mean_t‖ω_t‖ + 0.01·L_vel.
The official angle regulariser takes the norm over the time axis (a shape quirk); we take the per-frame norm and
then the mean (the README says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass
class LossWeights:
    charbonnier: float = 1.0
    edge: float = 0.05
    ssim: float = 0.05
    fft: float = 0.05
    angle: float = 1e-3
    velocity: float = 0.01
    velocity_smooth: float = 0.5  # β in L_vel = (1−β)·mean(v) + β·mean|v_{t+1} − v_t|
    charbonnier_eps: float = 1e-3


def charbonnier(pred: torch.Tensor, target: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """mean √((ŷ − y)² + ε²)."""
    d = pred - target
    return torch.sqrt(d * d + eps * eps).mean()


_SOBEL_X = torch.tensor([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])


def sobel_magnitude(x: torch.Tensor) -> torch.Tensor:
    """Per-channel Sobel gradient magnitude √(gx² + gy² + 1e-6) of [B, C, H, W] (zero padding)."""
    c = x.shape[1]
    kx = _SOBEL_X.to(x)[None, None].expand(c, 1, 3, 3)
    ky = _SOBEL_X.t().to(x)[None, None].expand(c, 1, 3, 3)
    gx = F.conv2d(x, kx, padding=1, groups=c)
    gy = F.conv2d(x, ky, padding=1, groups=c)
    return torch.sqrt(gx * gx + gy * gy + 1e-6)


def edge_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """L1 between the Sobel gradient magnitudes."""
    return F.l1_loss(sobel_magnitude(pred), sobel_magnitude(target))


def global_ssim(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """One-window SSIM over the whole image per (batch, channel), averaged; C1 = 0.01², C2 = 0.03².

    Population (biased) variances over H·W, as the official ``ssim_naive`` (without its extra ε).
    """
    dims = (-2, -1)
    mx, my = pred.mean(dims, keepdim=True), target.mean(dims, keepdim=True)
    vx = ((pred - mx) ** 2).mean(dims)
    vy = ((target - my) ** 2).mean(dims)
    cxy = ((pred - mx) * (target - my)).mean(dims)
    mx, my = mx[..., 0, 0], my[..., 0, 0]
    c1, c2 = 0.01**2, 0.03**2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return s.mean()


def fft_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """L1(|rfft2 ŷ| − |rfft2 y|) + 0.3·L1(∠rfft2 ŷ − ∠rfft2 y)."""
    fp, ft = torch.fft.rfft2(pred), torch.fft.rfft2(target)
    return F.l1_loss(fp.abs(), ft.abs()) + 0.3 * F.l1_loss(torch.angle(fp), torch.angle(ft))


def velocity_loss(v: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """L_vel = (1−β)·mean(v) + β·mean|v_{t+1} − v_t| for v [B, T−1] (only the first term when T − 1 < 2)."""
    if v.numel() == 0:
        return v.new_zeros(())
    smooth = (v[:, 1:] - v[:, :-1]).abs().mean() if v.shape[1] > 1 else v.new_zeros(())
    return (1 - beta) * v.mean() + beta * smooth


def delivr_loss(out, target: torch.Tensor, weights: LossWeights | None = None) -> dict[str, torch.Tensor]:
    """The weighted objective for a `DeLiVROutput` and the clean centre frame [B, 3, H, W]: ``total`` + terms."""
    w = weights or LossWeights()
    pred = out.restored
    if pred.shape != target.shape:
        raise ValueError(f"target shape {tuple(target.shape)} does not match the output {tuple(pred.shape)}")
    terms = {
        "charbonnier": charbonnier(pred, target, w.charbonnier_eps),
        "edge": edge_loss(pred, target),
        "ssim": 1 - global_ssim(pred, target),
        "fft": fft_loss(pred, target),
        "angle": out.omega.norm(dim=-1).mean(),
        "velocity": velocity_loss(out.velocity, w.velocity_smooth),
    }
    total = (
        w.charbonnier * terms["charbonnier"]
        + w.edge * terms["edge"]
        + w.ssim * terms["ssim"]
        + w.fft * terms["fft"]
        + w.angle * terms["angle"]
        + w.velocity * terms["velocity"]
    )
    return {"total": total, **terms}


# ----- evaluation metrics (the official convention: RGB uint8, data_range 255, channel_axis 2) -----


def to_uint8(img: torch.Tensor | np.ndarray) -> np.ndarray:
    """[3, H, W] (or [H, W, 3]) float in [0, 1] -> [H, W, 3] uint8, clamped and rounded."""
    a = img.detach().cpu().numpy() if isinstance(img, torch.Tensor) else np.asarray(img)
    if a.ndim == 3 and a.shape[0] == 3 and a.shape[-1] != 3:
        a = np.moveaxis(a, 0, -1)
    return np.round(np.clip(a, 0.0, 1.0) * 255.0).astype(np.uint8)


def rgb_to_y(img: np.ndarray) -> np.ndarray:
    """ITU-R BT.601 luma of an RGB uint8 image in the Matlab ``rgb2ycbcr`` convention (range 16–235), float64."""
    a = img.astype(np.float64)
    return 16.0 + (65.481 * a[..., 0] + 128.553 * a[..., 1] + 24.966 * a[..., 2]) / 255.0


def frame_metrics(pred, target) -> dict[str, float]:
    """PSNR/SSIM of one frame in RGB (uint8, data_range 255, channel_axis 2) and on the Y channel."""
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    p, t = to_uint8(pred), to_uint8(target)
    py, ty = rgb_to_y(p), rgb_to_y(t)
    return {
        "psnr_rgb": float(peak_signal_noise_ratio(t, p, data_range=255)),
        "ssim_rgb": float(structural_similarity(t, p, data_range=255, channel_axis=2)),
        "psnr_y": float(peak_signal_noise_ratio(ty, py, data_range=255)),
        "ssim_y": float(structural_similarity(ty, py, data_range=255)),
    }


def flicker_error(pred: torch.Tensor, target: torch.Tensor) -> float:
    """E = mean_t mean|(ŷ_{t+1} − ŷ_t) − (y_{t+1} − y_t)| over sequences [F, 3, H, W] (or [N, F, 3, H, W])."""
    dp = pred[..., 1:, :, :, :] - pred[..., :-1, :, :, :]
    dt = target[..., 1:, :, :, :] - target[..., :-1, :, :, :]
    return float((dp - dt).abs().mean())
