"""`iclr26-delivr reproduce`: claims C1–C5 of the spec on synthetic rainy clips from scikit-image's pictures.

C1 is exact maths (no training). For each seed the full DeLiVR and the ablation (spatial bias, temporal bias and
decay off, band mask kept) are trained from the same initial weights on the same clips; C2–C5 compare them on
held-out clips of a picture never seen in training. Every verdict is computed from the numbers it prints.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from iclr26_core.errors import UserError
from iclr26_core.report import Claim, Results

from . import figures
from .analysis import angle_gradients, masked_attention_mass
from .arms import arm_configs, summarise
from .arms import table as arms_table
from .bias import lie_bias
from .claims import claims as claims_c2_c5
from .data import Motion, rainy_clips, rainy_sequences
from .derain import derain
from .experiment import (
    fit,
    image_metrics,
    make_model,
    oracle_angles,
    predict,
    psnr_uint8,
    relative_angles,
    spearman,
    temporal_median,
    train_settings,
)
from .keys import claim_d1, diagnostic
from .lie import so2_matrix
from .loss import flicker_error
from .train_cmd import loss_weights


def claim_c1(samples: int, grid: tuple[int, int], frames: int, seed: int) -> tuple[Claim, dict[str, Any]]:
    """Invariance of the relative Lie bias to a common rotation and velocity = |Δθ| (float64, exact)."""
    gen = torch.Generator().manual_seed(seed)
    lim = math.radians(35.0)
    theta = (torch.rand(samples, frames, generator=gen, dtype=torch.float64) * 2 - 1) * lim
    offset = (torch.rand(samples, 1, generator=gen, dtype=torch.float64) * 2 - 1) * math.radians(30.0)
    a = lie_bias(so2_matrix(theta), grid)
    b = lie_bias(so2_matrix(theta + offset), grid)
    bias_diff = float((a.bias - b.bias).abs().max())
    vel_diff = float((a.velocity - (theta[:, 1:] - theta[:, :-1]).abs()).abs().max())
    # the to_base form (the abstract's wording) is not invariant: reported for contrast
    c = lie_bias(so2_matrix(theta), grid, bias_form="to_base")
    d = lie_bias(so2_matrix(theta + offset), grid, bias_form="to_base")
    to_base_diff = float((c.bias - d.bias).abs().max())
    claim = Claim(
        "C1",
        "the Lie bias is differential: cross-frame bias and velocity depend only on relative rotations",
        "qualitative (method design)",
        {"max_bias_change": bias_diff, "max_velocity_error": vel_diff},
        bias_diff < 1e-5 and vel_diff < 1e-5,
        "max |B(θ+c) − B(θ)| < 1e-5 and max |v_t − |θ_t − θ_{t−1}|| < 1e-5",
        f"{samples} draws θ ∈ [−35°, 35°]^{frames}, c ~ U(−30°, 30°), {grid[0]}×{grid[1]} grid, float64; "
        f"the to_base form changes by {to_base_diff:.3f} (not invariant)",
    )
    return claim, {
        "max_bias_change": bias_diff,
        "max_velocity_error": vel_diff,
        "to_base_change": to_base_diff,
    }


def motion(cfg) -> Motion:
    """The generator's camera motion and rain from ``data.*`` (missing keys: the spec's values)."""
    d = cfg.data
    defaults = Motion()
    try:
        return Motion(
            **{
                k: float(d.get(k, getattr(defaults, k)))
                for k in ("omega_deg", "theta0_deg", "drift_px", "jitter_deg", "rain_density")
            }
        )
    except ValueError as exc:
        raise UserError(f"bad data setting: {exc}") from None


def _heldout(cfg, base_seed: int):
    """The held-out clips (chelsea, never trained on) and the 9-frame sequences of C4."""
    size, frames, mot = int(cfg.data.size), int(cfg.model.frames), motion(cfg)
    held = rainy_clips(
        int(cfg.data.eval_clips),
        size=size,
        frames=frames,
        split="heldout",
        seed=10_000 + base_seed,
        motion=mot,
    )
    seqs = rainy_sequences(
        int(cfg.data.sequences),
        length=int(cfg.data.sequence_length),
        size=size,
        seed=20_000 + base_seed,
        motion=mot,
    )
    return held, seqs


def _arm(
    cfg, device: str, seed: int, ablation: bool, train, held, seqs, position, label: str = "", oracle=False
):
    """Train one arm (the full model or the ablation) and measure it: (numbers, one restored example frame).
    ``oracle``: θ_t := the generator's true φ_t (ORACLE_SIGN) in training and evaluation instead of the head's."""
    c = (int(cfg.model.frames) - 1) // 2
    k = int(cfg.data.curve_clips)
    weights = loss_weights(cfg.get("loss"))
    model = make_model(OmegaConf.to_container(cfg.model), ablation=ablation, seed=seed).to(device)
    name = ("ablation" if ablation else "delivr") + (f" [{label}]" if label else "")
    settings = train_settings(cfg, seed, f"seed {seed} {name}", device, position)
    given = oracle_angles(held.phi_deg) if oracle else None
    model, log = fit(
        model,
        train.rainy,
        train.clean[:, c],
        settings,
        val=(held.rainy[:k], held.clean[:k, c]),
        weights=weights,
        angles=(oracle_angles(train.phi_deg), given[:k]) if oracle else None,
    )
    restored, theta = predict(model, held.rainy, angles=given)
    psnr = psnr_uint8(restored, held.clean[:, c])
    video = [
        derain(model, seq, angles=oracle_angles(phi) if oracle else None)
        for seq, phi in zip(seqs.rainy, seqs.phi_deg, strict=True)
    ]
    flicker = float(np.mean([flicker_error(v, s) for v, s in zip(video, seqs.clean, strict=True)]))
    pred, true = relative_angles(theta, held.phi_deg)
    probe = held.rainy[:4].to(device)
    grads = angle_gradients(model, train.rainy[:4].to(device), train.clean[:4, c].to(device), weights)
    numbers = {
        # what the official mask-before-MLP order would leak with these weights (the model is not changed)
        "official_mask_leak": masked_attention_mass(model, probe, mask_after_mlp=False),
        "psnr_per_clip": psnr.tolist(),
        "psnr": float(psnr.mean()),
        **image_metrics(restored, held.clean[:, c]),
        "flicker": flicker,
        "curve": log.evals,
        "final_loss": log.losses[-1],
        "loss_terms_first": log.terms[0],
        "loss_terms_last": log.terms[-1],
        "train_seconds": log.seconds,
        "tau": float(model.tau.detach()),
        "res_scale": float(model.res_scale.detach()),
        "layerscale_attention": [float(b.gamma1.detach().abs().mean()) for b in model.blocks],
        "angle_grad": grads,
        "angle_pred_deg": pred.tolist(),
        "angle_true_deg": true.tolist(),
        "spearman": spearman(pred, true),
        "theta_range_deg": float(np.ptp(np.rad2deg(theta.numpy()))),
        "relative_pred_range_deg": [float(pred.min()), float(pred.max())],
        "relative_true_range_deg": [float(true.min()), float(true.max())],
    }
    return numbers, restored[0]


def seed_job(
    cfg_dict: dict, seed: int, base_seed: int, device: str, position: int | None = None
) -> dict[str, Any]:
    """Full and ablation training for one seed on its own fresh clips (runs in a worker process when
    ``workers`` > 1: each worker regenerates the deterministic data instead of receiving it). The restored example
    frames come back under ``examples`` (tensors, for the figure; not part of the metrics)."""
    cfg = OmegaConf.create(cfg_dict)
    torch.set_num_threads(max(1, int(cfg.threads)))
    held, seqs = _heldout(cfg, base_seed)
    size, frames = int(cfg.data.size), int(cfg.model.frames)
    train = rainy_clips(
        int(cfg.data.train_clips), size=size, frames=frames, split="train", seed=seed, motion=motion(cfg)
    )
    full, full_example = _arm(cfg, device, seed, False, train, held, seqs, position)
    abl, abl_example = _arm(cfg, device, seed, True, train, held, seqs, position)
    oracle = None
    if bool(cfg.get("oracle", False)):  # the Lie bias given the true rotations (C3/C4 beside the learned arm)
        oracle = _arm(cfg, device, seed, False, train, held, seqs, position, "oracle θ", oracle=True)[0]
    extra = {}
    for name, (arm_cfg, pair) in arm_configs(cfg).items():  # extra arms: same weights, batches, clips
        extra[name] = {"delivr": _arm(arm_cfg, device, seed, False, train, held, seqs, position, name)[0]}
        if pair:
            extra[name]["ablation"] = _arm(arm_cfg, device, seed, True, train, held, seqs, position, name)[0]
    return {
        "seed": seed,
        "delivr": full,
        "ablation": abl,
        **({"oracle": oracle} if oracle is not None else {}),
        "arms": extra,
        "examples": {"delivr": full_example, "ablation": abl_example},
    }


def _run_seeds(cfg, ctx, seeds: list[int]) -> list[dict[str, Any]]:
    # one process per seed up to ``workers`` (more processes than cores still balances the seeds' work)
    workers = max(1, min(int(cfg.workers), len(seeds)))
    cfg_dict = OmegaConf.to_container(cfg, resolve=True)
    if workers == 1 or ctx.device != "cpu":
        return [seed_job(cfg_dict, s, ctx.seed, ctx.device) for s in seeds]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from iclr26_core.runtime import quiet_worker

    ctx.log(f"training {len(seeds)} seeds in {workers} worker processes ({int(cfg.threads)} thread(s) each)")
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=spawn, initializer=quiet_worker) as pool:
        futures = [
            pool.submit(seed_job, cfg_dict, s, ctx.seed, ctx.device, i % workers) for i, s in enumerate(seeds)
        ]
        return [f.result() for f in futures]


def _extra_arms(cfg, ctx, per_seed: list[dict], rainy_psnr: float) -> dict[str, Any]:
    """Summaries of the extra arms (and of the headline, for comparison); writes ``arms.md`` and logs it."""
    from iclr26_core.fs import atomic_write_text

    specs = {
        k: v for k, v in OmegaConf.to_container(cfg.get("arms") or {}, resolve=True).items() if v is not None
    }
    if not specs:
        return {}
    rows = {
        name: summarise(
            [s["arms"][name]["delivr"] for s in per_seed],
            [s["arms"][name]["ablation"] for s in per_seed] if spec.get("pair") else None,
            rainy_psnr,
            {k: v for k, v in spec.items() if k != "pair"},
        )
        for name, spec in specs.items()
    }
    head = summarise([s["delivr"] for s in per_seed], [s["ablation"] for s in per_seed], rainy_psnr, {})
    text = arms_table(rows, head)
    atomic_write_text(ctx.run_dir / "arms.md", text)
    ctx.log(text)
    return rows


def run(cfg, ctx) -> Results:
    if cfg.scale.name == "paper" and ctx.device == "cpu":
        raise UserError("scale=paper trains the paper-size network and needs a GPU (device=cuda)")
    c, k = (int(cfg.model.frames) - 1) // 2, int(cfg.data.curve_clips)
    c1, c1_raw = claim_c1(int(cfg.c1.samples), tuple(cfg.c1.grid), int(cfg.c1.frames), ctx.seed)
    held, seqs = _heldout(cfg, ctx.seed)
    keys = diagnostic(
        held.phi_deg, int(cfg.data.size), int(cfg.model.patch), int(cfg.model.band), motion(cfg).omega_deg
    )
    median = temporal_median(held.rainy)
    baselines = {
        "rainy": {
            "psnr": float(psnr_uint8(held.rainy[:, c], held.clean[:, c]).mean()),
            **image_metrics(held.rainy[:, c], held.clean[:, c]),
        },
        "temporal_median": {
            "psnr": float(psnr_uint8(median, held.clean[:, c]).mean()),
            **image_metrics(median, held.clean[:, c]),
        },
        "rainy_flicker": float(
            np.mean([flicker_error(r, s) for r, s in zip(seqs.rainy, seqs.clean, strict=True)])
        ),
        "rainy_curve_clips": float(psnr_uint8(held.rainy[:k, c], held.clean[:k, c]).mean()),
    }
    seeds = [ctx.seed + i for i in range(int(cfg.seeds))]
    per_seed = _run_seeds(cfg, ctx, seeds)
    examples = [s.pop("examples") for s in per_seed]  # tensors for the figure, not metrics
    figures_ = [
        figures.psnr_curves(ctx.run_dir / "psnr_curves.png", per_seed, baselines["rainy_curve_clips"]),
        figures.angles(ctx.run_dir / "angles.png", per_seed),
        figures.examples(ctx.run_dir / "examples.png", held, examples[0], c),
    ]
    decide_cfg = cfg.get("decide") or {}
    claims = claims_c2_c5(
        per_seed,
        baselines,
        c3_min_db=float(decide_cfg.get("c3_min_db", 0.1)),
        c4_min_fraction=float(decide_cfg.get("c4_min_fraction", 0.01)),
    )
    arms = _extra_arms(cfg, ctx, per_seed, baselines["rainy"]["psnr"])
    metrics = {
        "c1": c1_raw,
        "best_key": keys,
        "baselines": baselines,
        "seeds": per_seed,
        "model": OmegaConf.to_container(cfg.model),
        "parameters": sum(p.numel() for p in make_model(OmegaConf.to_container(cfg.model)).parameters()),
        "arms": arms,
    }
    if bool(cfg.bench):
        from .peers import bench

        first, n_params = per_seed[0], metrics["parameters"]
        reference = {
            f"{name} (this run, seed {first['seed']})": {"psnr": first[arm]["psnr"], "parameters": n_params}
            for name, arm in (("DeLiVR", "delivr"), ("ablation", "ablation"))
        }
        metrics["bench"] = bench(cfg, ctx, held, seeds[0], reference=reference)
    return Results(claims=[c1, *claims, claim_d1(keys)], metrics=metrics, figures=figures_)
