"""`reproduce bench=true`: DeLiVR's peers side by side on the same held-out clips (spec "Peers to compare").

Rows: the temporal median (no dependency); the oracle-aligned median (kornia's rotation warp by the true relative
angle); kornia's So2/So3 as an independent oracle of our exp/log; the same tiny net with the Lie bias swapped for
x-transformers' ALiBi slopes over frame distance or for a learned (Δt, Δy, Δx) table indexed with timm's Swin
relative-position index; piq and torchmetrics PSNR/SSIM next to ours. The peers are the optional ``peers`` extra:
each is imported lazily and a missing one gives a row saying "not installed".
"""

from __future__ import annotations

import importlib.util
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from iclr26_core.fs import atomic_write_text

from .data import RainClips, rainy_clips
from .experiment import fit, image_metrics, make_model, predict, psnr_uint8, temporal_median, train_settings
from .lie import so2_matrix, so3_exp, so3_log

_ALIGNED, _ORACLE, _ALIBI, _RELPOS, _METRICS = (
    "oracle-aligned median (kornia)",
    "kornia So2/So3 oracle",
    "ALiBi temporal bias (x-transformers)",
    "relative-position table (timm Swin)",
    "piq / torchmetrics PSNR-SSIM cross-check",
)
PEERS = {  # row -> (modules it needs, what it is)
    "temporal median": ((), "per-pixel median of the T rainy frames"),
    _ALIGNED: (("kornia",), "frame t rotated by the true φ_c − φ_t onto the centre frame, then the median"),
    _ORACLE: (("kornia",), "max abs difference of our so3_exp, so3_log, SO(2) from kornia's (float64)"),
    _ALIBI: (("x_transformers",), "tiny net, Lie bias replaced by ALiBi −m_h·|t − s| over frame distance"),
    _RELPOS: (("timm",), "tiny net, Lie bias replaced by a learned table over (Δt, Δy, Δx)"),
    _METRICS: (("piq", "torchmetrics"), "PSNR/SSIM of the rainy centre frames: ours, piq, torchmetrics"),
}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def token_frames(frames: int, grid: tuple[int, int], device=None) -> torch.Tensor:
    """Frame index of every token in the sequence order t·N + i: [T·N] float."""
    return torch.arange(frames, device=device, dtype=torch.float32).repeat_interleave(grid[0] * grid[1])


class AlibiTemporalBias(nn.Module):
    """ALiBi over frame distance: bias[h, (t,i), (s,j)] = −m_h·|t − s| with x-transformers' slopes (no parameters)."""

    def __init__(self, heads: int):
        super().__init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from x_transformers.x_transformers import AlibiPositionalBias
        self.alibi = AlibiPositionalBias(heads=heads, total_heads=heads)

    @property
    def slopes(self) -> torch.Tensor:
        """m_h: [heads]."""
        return self.alibi.slopes.flatten()

    def forward(self, frames: int, grid: tuple[int, int]) -> torch.Tensor:
        """-> [heads, TN, TN]."""
        return self.alibi.forward_custom_pos(token_frames(frames, grid, self.alibi.slopes.device))


class RelativePositionTable(nn.Module):
    """A learned per-head table over relative offsets (Δt, Δy, Δx) (Swin's table plus a temporal offset).

    index[(t,i),(s,j)] = (t − s + T − 1)·S + swin[i, j], with swin = timm's get_relative_position_index(H', W')
    and S = (2H'−1)(2W'−1); table [(2T−1)·S, heads], trunc-normal(0.02) like Swin.
    """

    def __init__(self, heads: int, frames: int, grid: tuple[int, int]):
        super().__init__()
        from timm.models.swin_transformer import get_relative_position_index

        self.frames, self.grid = int(frames), (int(grid[0]), int(grid[1]))
        h, w = self.grid
        spatial = (2 * h - 1) * (2 * w - 1)
        self.table = nn.Parameter(torch.empty((2 * frames - 1) * spatial, heads))
        nn.init.trunc_normal_(self.table, std=0.02)
        t = torch.arange(frames)
        dt = t[:, None] - t[None, :] + frames - 1  # [T, T]
        swin = get_relative_position_index(h, w)  # [N, N]
        n = h * w
        index = dt[:, None, :, None] * spatial + swin[None, :, None, :]  # [T, N, T, N]
        self.register_buffer("index", index.reshape(frames * n, frames * n), persistent=False)

    def forward(self, frames: int, grid: tuple[int, int]) -> torch.Tensor:
        """-> [heads, TN, TN]."""
        if frames != self.frames or tuple(grid) != self.grid:
            raise ValueError(
                f"table built for T={self.frames}, grid {self.grid}; got T={frames}, grid {tuple(grid)}"
            )
        n = self.index.shape[0]
        return self.table[self.index.reshape(-1)].reshape(n, n, -1).permute(2, 0, 1)


def align_to_centre(frames: torch.Tensor, phi_deg: torch.Tensor) -> torch.Tensor:
    """Rotate frame t by φ_c − φ_t (kornia: positive = counter-clockwise as displayed, about the frame centre;
    border padding) so its content lines up with the centre frame: [n, T, 3, H, W] -> same (translation kept)."""
    from kornia.geometry.transform import rotate

    n, t = frames.shape[:2]
    c = (t - 1) // 2
    angle = (phi_deg[:, c : c + 1] - phi_deg).to(torch.float32).reshape(-1)
    out = rotate(frames.reshape(n * t, *frames.shape[2:]), angle, padding_mode="border")
    return out.reshape(frames.shape)


def kornia_oracle(samples: int = 2000, seed: int = 0) -> dict[str, float]:
    """Max |ours − kornia| on random rotation vectors (angles in [1e-8, π − 1e-2], float64) and SO(2) angles."""
    from kornia.geometry.liegroup import So2, So3

    gen = torch.Generator().manual_seed(seed)
    axis = torch.randn(samples, 3, generator=gen, dtype=torch.float64)
    angle = torch.rand(samples, 1, generator=gen, dtype=torch.float64) * (math.pi - 1e-2)
    angle[:8] = 1e-8
    omega = axis / axis.norm(dim=-1, keepdim=True) * angle
    rot = So3.exp(omega).matrix()
    theta = (torch.rand(samples, generator=gen, dtype=torch.float64) * 2 - 1) * math.pi
    with torch.no_grad():
        return {
            "so3_exp_max_diff": float((so3_exp(omega) - rot).abs().max()),
            "so3_log_max_diff": float((so3_log(rot) - So3.from_matrix(rot).log()).abs().max()),
            "so2_max_diff": float((so2_matrix(theta)[..., :2, :2] - So2.exp(theta).matrix()).abs().max()),
        }


def metric_cross_check(pred: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """PSNR/SSIM means of images [N, 3, H, W] (rounded to uint8 levels first) by ours, piq and torchmetrics.

    SSIM windows differ by design: ours is the official convention (scikit-image defaults, 7×7 uniform); piq and
    torchmetrics use an 11×11 Gaussian (σ 1.5), so they are compared with scikit-image's Gaussian setting
    (``gaussian_weights=True, use_sample_covariance=False``). piq and scikit-image average over the valid interior,
    torchmetrics over the whole reflect-padded image. piq adds 1e-8 to the MSE (≈1e-5 dB).
    """
    import piq
    from skimage.metrics import structural_similarity
    from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

    p = torch.round(pred.clamp(0, 1) * 255).double() / 255
    t = torch.round(target.clamp(0, 1) * 255).double() / 255
    ours = psnr_uint8(pred, target)
    psnr_piq = piq.psnr(p, t, data_range=1.0, reduction="none")
    psnr_tm = peak_signal_noise_ratio(p, t, data_range=1.0, reduction="none", dim=(1, 2, 3))
    ssim_piq = piq.ssim(p, t, data_range=1.0, reduction="none")
    ssim_tm = structural_similarity_index_measure(p, t, data_range=1.0, reduction="none")
    gauss = torch.tensor(
        [
            structural_similarity(
                b.permute(1, 2, 0).numpy(), a.permute(1, 2, 0).numpy(), data_range=1.0, channel_axis=2,
                gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
            )
            for a, b in zip(p, t, strict=True)
        ],
        dtype=torch.float64,
    )  # fmt: skip
    return {
        "psnr_ours": float(ours.mean()),
        "psnr_piq": float(psnr_piq.mean()),
        "psnr_torchmetrics": float(psnr_tm.mean()),
        "psnr_max_diff": float(max((ours - psnr_piq).abs().max(), (ours - psnr_tm).abs().max())),
        "ssim_ours": image_metrics(pred, target)["ssim_rgb"],
        "ssim_skimage_gaussian": float(gauss.mean()),
        "ssim_piq": float(ssim_piq.mean()),
        "ssim_torchmetrics": float(ssim_tm.mean()),
        "ssim_piq_max_diff": float((ssim_piq - gauss).abs().max()),
        "ssim_torchmetrics_max_diff": float((ssim_tm - gauss).abs().max()),
    }


def _ms_per_clip(fn: Callable[[torch.Tensor], Any], clips: torch.Tensor, one_at_a_time: bool = True) -> float:
    """CPU wall time per clip (ms) of ``fn`` on clips [n, T, 3, H, W]: best of 3 passes after a warm-up call."""
    best = math.inf
    with torch.no_grad():
        fn(clips[:1])
        for _ in range(3):
            start = time.perf_counter()
            for part in clips.split(1 if one_at_a_time else len(clips)):
                fn(part)
            best = min(best, time.perf_counter() - start)
    return 1000 * best / len(clips)


def _trained_row(name: str, cfg, device: str, held: RainClips, train: RainClips, seed: int) -> dict[str, Any]:
    """The tiny net (Lie-bias parts off) with ``bias_override`` = the peer's bias, trained like DeLiVR."""
    from omegaconf import OmegaConf

    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model = make_model(model_cfg, ablation=True, seed=seed)
    t, p, size = int(cfg.model.frames), int(cfg.model.patch), int(cfg.data.size)
    grid = (math.ceil(size / p), math.ceil(size / p))
    heads = model.config.heads
    model.bias_override = (
        AlibiTemporalBias(heads) if name == _ALIBI else RelativePositionTable(heads, t, grid)
    )
    c = (t - 1) // 2
    model, log = fit(
        model, train.rainy, train.clean[:, c], train_settings(cfg, seed, name, device, eval_every=0)
    )
    restored, _ = predict(model, held.rainy)
    model = model.to("cpu").eval()
    extra = model.bias_override.table.numel() if hasattr(model.bias_override, "table") else 0
    return {
        "psnr": float(psnr_uint8(restored, held.clean[:, c]).mean()),
        "ssim": image_metrics(restored, held.clean[:, c])["ssim_rgb"],
        "parameters": sum(q.numel() for q in model.parameters()),
        "ms_per_clip": _ms_per_clip(model, held.rainy[: min(4, len(held))]),
        "note": f"{int(cfg.steps)} steps, final loss {log.losses[-1]:.4f}; bias parameters {extra}"
        + (f"; slopes {[round(float(m), 5) for m in model.bias_override.slopes]}" if extra == 0 else ""),
        "train_seconds": log.seconds,
    }


def _row(peer: str, **values: Any) -> dict[str, Any]:
    base = {"peer": peer, "what": PEERS[peer][1], "psnr": None, "parameters": None, "ms_per_clip": None}
    return {**base, "note": "", **values}


def _median_row(clips: torch.Tensor, phi_deg: torch.Tensor | None, target: torch.Tensor) -> dict[str, Any]:
    """The (aligned, when phi_deg is given) temporal median of clips [n, T, 3, H, W] against target [n, 3, H, W]."""

    def run(x: torch.Tensor, phi: torch.Tensor | None) -> torch.Tensor:
        return temporal_median(x if phi is None else align_to_centre(x, phi))

    out = run(clips, phi_deg)
    ms = _ms_per_clip(lambda x: run(x, None if phi_deg is None else phi_deg[: len(x)]), clips, False)
    return {
        "psnr": float(psnr_uint8(out, target).mean()),
        "ssim": image_metrics(out, target)["ssim_rgb"],
        "parameters": 0,
        "ms_per_clip": ms,
    }


def bench(
    cfg, ctx, held: RainClips, seed: int, reference: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One row per peer (PSNR dB on held-out centre frames, RGB uint8; parameters; CPU ms per clip; note);
    writes ``bench.md`` into ``ctx.run_dir`` and logs it. held: clips [n, T, 3, H, W] with phi_deg [n, T].
    ``reference``: name -> {"psnr", "parameters"} of this run's own models, shown first for comparison."""
    torch.set_num_threads(max(1, int(cfg.get("threads", 1))))
    c = (held.rainy.shape[1] - 1) // 2
    target = held.clean[:, c]
    train = None
    rows = []
    for peer, (needs, _) in PEERS.items():
        missing = [m for m in needs if not installed(m)]
        if missing:
            ctx.peers_missing(m.replace("_", "-") for m in missing)
            rows.append(
                _row(peer, note=f"not installed ({', '.join(missing)}): pip install 'iclr26-delivr[peers]'")
            )
        elif peer == "temporal median":
            rows.append(_row(peer, **_median_row(held.rainy, None, target)))
        elif peer == _ALIGNED:
            note = "true angles; the drift (up to √2 px per frame) is not undone"
            rows.append(_row(peer, **_median_row(held.rainy, held.phi_deg, target), note=note))
        elif peer == _ORACLE:
            diffs = kornia_oracle(seed=seed)
            rows.append(_row(peer, note=", ".join(f"{k} {v:.1e}" for k, v in diffs.items()), **diffs))
        elif peer == _METRICS:
            m = metric_cross_check(held.rainy[:, c], target)
            note = (
                f"rainy input: PSNR ours/piq/torchmetrics {m['psnr_ours']:.3f}/{m['psnr_piq']:.3f}/"
                f"{m['psnr_torchmetrics']:.3f} dB (max diff {m['psnr_max_diff']:.1e}); SSIM ours (official 7×7) "
                f"{m['ssim_ours']:.4f}; Gaussian-11 SSIM scikit-image/piq/torchmetrics "
                f"{m['ssim_skimage_gaussian']:.4f}/{m['ssim_piq']:.4f}/{m['ssim_torchmetrics']:.4f} (max diff vs "
                f"scikit-image: piq {m['ssim_piq_max_diff']:.1e}, torchmetrics {m['ssim_torchmetrics_max_diff']:.1e}, "
                "which also averages the reflect-padded border)"
            )
            rows.append(_row(peer, note=note, **m))
        else:
            if train is None:
                frames, size = int(cfg.model.frames), int(cfg.data.size)
                train = rainy_clips(int(cfg.data.train_clips), size, frames, "train", seed)
            ctx.log(f"bench: training {peer} for {int(cfg.steps)} steps")
            rows.append(_row(peer, **_trained_row(peer, cfg, ctx.device, held, train, seed)))
    ours = [
        {"peer": k, "what": "trained in this run (C2/C3)", "ms_per_clip": None, "note": "", **v}
        for k, v in (reference or {}).items()
    ]
    table = bench_table(ours + rows, float(psnr_uint8(held.rainy[:, c], target).mean()), len(held))
    atomic_write_text(ctx.run_dir / "bench.md", table)
    ctx.log(table)
    return rows


def bench_table(rows: list[dict[str, Any]], rainy_psnr: float, clips: int) -> str:
    """The rows as a markdown table (None -> —)."""

    def fmt(v: Any, spec: str = "") -> str:
        return "—" if v is None else format(v, spec).replace("|", "\\|")

    lines = [
        f"## Peers (bench): {clips} held-out clips, rainy input {rainy_psnr:.2f} dB (centre frame, RGB uint8)",
        "",
        "| peer | what | PSNR (dB) | parameters | CPU ms/clip | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {fmt(r['peer'])} | {fmt(r['what'])} | {fmt(r['psnr'], '.2f')} | {fmt(r['parameters'], ',')} | "
            f"{fmt(r['ms_per_clip'], '.1f')} | {fmt(r['note'])} |"
        )
    return "\n".join(lines) + "\n"
