"""The miniature's experiment loop: one seed = train the toy CLIP, compute every image's view features once, then
run zero-shot, TPT, A-TPT, C-TPT and O-TPT (λ_O chosen on validation) and the extra A-TPT arms ``reg.atpt_arms``
(λ < 0: the released objective) on exactly the same features.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .calibration import accuracy, ece20, fit_temperature
from .digits import DIGIT_NAMES, digit_splits, toy_processor, train_toy_clip
from .tuner import TestTimePromptTuner, tune_on_features

METHODS = ("zero-shot", "TPT", "A-TPT", "C-TPT", "O-TPT")


def arm_name(lam: float) -> str:
    """The name of an extra A-TPT arm at λ; λ < 0 is the released atpt_classification.py objective (+|λ|·AD)."""
    return f"A-TPT λ={lam:g}" + (" (released)" if lam < 0 else "")


_REG = {"TPT": "none", "A-TPT": "atpt", "C-TPT": "ctpt", "O-TPT": "otpt"}


def digit_tuner(model, processor, tok, cfg, seed: int, **kw) -> TestTimePromptTuner:
    """A tuner over the ten digit classes with the run's views (``cfg.tta``: views, selection, augment), so the
    transformers toy and its open_clip port draw the same views for a seed."""
    tta = cfg.tta
    return TestTimePromptTuner(
        model,
        processor,
        list(DIGIT_NAMES),
        tokenizer=tok,
        n_views=int(tta.views),
        selection=float(tta.selection),
        augment=str(tta.augment),
        seed=seed,
        **kw,
    )


def view_bank(
    tuner: TestTimePromptTuner, images: torch.Tensor, offset: int, progress, desc: str
) -> torch.Tensor:
    """[n_images, V, P] normalised view features; image i's views are seeded by (seed, offset + i)."""
    return torch.stack(
        [tuner.view_features(images[i], offset + i) for i in progress(range(len(images)), desc=desc)]
    )


def run_methods(
    tuner,
    bank: torch.Tensor,
    labels: np.ndarray,
    methods: dict[str, tuple[str, float]],
    lr: float,
    cfg_tta,
    progress=None,
    desc: str = "",
) -> dict[str, dict[str, Any]]:
    """{name: {acc, ece, ad_deg, probs}} for methods {name: (regularizer, λ)}; 'zero-shot' needs no tuning."""
    s = tuner.logit_scale
    out: dict[str, dict[str, Any]] = {}
    rows = {name: [] for name in methods}
    ads = {name: [] for name in methods}
    it = range(len(bank))
    for i in progress(it, desc=desc) if progress else it:
        for name, (reg, lam) in methods.items():
            p = tune_on_features(
                tuner.learner,
                bank[i],
                s,
                regularizer=reg,
                lam=lam,
                steps=0 if name == "zero-shot" else int(cfg_tta.steps),
                lr=lr,
                selection=float(cfg_tta.selection),
            )
            rows[name].append(p.probs.numpy())
            ads[name].append(math.degrees(p.ad))
    for name in methods:
        probs = np.stack(rows[name])
        out[name] = {
            "acc": accuracy(probs, labels),
            "ece": ece20(probs, labels),
            "ad_deg": float(np.mean(ads[name])),
            "confidence": 100.0 * float(probs.max(-1).mean()) if len(probs) else float("nan"),
            "probs": probs,
        }
    return out


def run_seed(cfg, seed: int, ctx) -> dict[str, Any]:
    """Everything one seed measures, at the headline learning rate and at each extra-arm learning rate."""
    splits = digit_splits(seed, n_test=cfg.data.n_test, n_val=cfg.data.n_val)
    model, tok, train_loss = train_toy_clip(
        splits,
        steps=int(cfg.train.steps),
        seed=seed,
        lr=float(cfg.train.lr),
        batch=int(cfg.train.batch),
        progress=True,
        logit_scale=cfg.train.get("logit_scale"),
    )
    tta = cfg.tta
    tuner = digit_tuner(model, toy_processor(), tok, cfg, seed, lr=float(tta.lr), lam=float(cfg.reg.atpt))
    prog = ctx.progress
    xt, yt = splits.test
    xv, yv = splits.val
    yt, yv = yt.numpy(), yv.numpy()
    test_bank = view_bank(tuner, xt, 0, prog, f"views test (seed {seed})")
    val_bank = view_bank(tuner, xv, 100_000, prog, f"views val (seed {seed})")
    raw_scale = tuner.logit_scale
    if cfg.train.calibrate_scale:
        calibrate_logit_scale(tuner, val_bank, yv)
    clean = run_methods(
        tuner,
        test_bank_clean(tuner, splits),
        splits.test_clean[1].numpy(),
        {"zero-shot": ("none", 0.0)},
        0.0,
        tta,
    )["zero-shot"]
    result: dict[str, Any] = {
        "seed": seed,
        "train_loss": train_loss,
        "zero_shot_clean_acc": clean["acc"],
        "logit_scale_trained": raw_scale,
        "logit_scale_used": tuner.logit_scale,
        "lrs": {},
    }
    for lr in [float(tta.lr), *[float(v) for v in tta.extra_lrs]]:
        otpt = run_methods(
            tuner,
            val_bank,
            yv,
            {f"O-TPT λ={lam:g}": ("otpt", float(lam)) for lam in cfg.reg.otpt_grid},
            lr,
            tta,
            prog,
            f"O-TPT λ on val (seed {seed}, lr {lr:g})",
        )
        val_ece = {float(k.split("=")[1]): v["ece"] for k, v in otpt.items()}
        lam_o = min(val_ece, key=val_ece.get)
        methods = {
            "zero-shot": ("none", 0.0),
            "TPT": ("none", 0.0),
            "A-TPT": ("atpt", float(cfg.reg.atpt)),
            "C-TPT": ("ctpt", float(cfg.reg.ctpt)),
            "O-TPT": ("otpt", lam_o),
        }
        methods.update({arm_name(lam): ("atpt", float(lam)) for lam in cfg.reg.get("atpt_arms", [])})
        res = run_methods(tuner, test_bank, yt, methods, lr, tta, prog, f"TTA test (seed {seed}, lr {lr:g})")
        tm = torchmetrics_ece(res["A-TPT"]["probs"], yt)
        res["A-TPT"]["ece_torchmetrics"] = tm
        result["lrs"][f"{lr:g}"] = {"lambda_o": lam_o, "val_ece_otpt": val_ece, "methods": res}
    if cfg.bench:
        result["bench"] = bench_rows(tuner, val_bank, yv, test_bank, yt)
        if cfg.get("open_clip", True) and seed == int(cfg.seed):  # second runtime, first seed (budget)
            head = result["lrs"][f"{float(tta.lr):g}"]["methods"]
            result["bench"]["open_clip"] = open_clip_row(cfg, seed, tuner, tok, xt, yt, head, prog)
    return result


def open_clip_row(cfg, seed: int, tuner, tok, xt, yt, head: dict, progress) -> dict[str, Any]:
    """The toy ported into open_clip (same weights), its own view features of the same views, then zero-shot, TPT
    and A-TPT through the open_clip adapter at the headline settings; |Δp| against the transformers runs."""
    try:
        from .openclip_port import hf_to_open_clip

        oc = hf_to_open_clip(tuner.clip, tuner.mean.flatten().tolist(), tuner.std.flatten().tolist())
    except ImportError:
        return {"status": "not installed"}
    tta = cfg.tta
    oc_tuner = digit_tuner(oc, None, tok, cfg, seed)
    bank = view_bank(oc_tuner, xt, 0, progress, f"open_clip views test (seed {seed})")
    methods = {"zero-shot": ("none", 0.0), "TPT": ("none", 0.0), "A-TPT": ("atpt", float(cfg.reg.atpt))}
    res = run_methods(
        oc_tuner, bank, yt, methods, float(tta.lr), tta, progress, f"open_clip TTA (seed {seed})"
    )
    out: dict[str, Any] = {"status": "ok"}
    for name, v in res.items():
        out[name] = {
            "acc": v["acc"],
            "ece": v["ece"],
            "ad_deg": v["ad_deg"],
            "max_abs_dprob_vs_transformers": float(np.abs(v["probs"] - head[name]["probs"]).max()),
        }
    return out


def calibrate_logit_scale(tuner, val_bank, yv) -> float:
    """Set the toy CLIP's logit scale s to s/T with T fitted on the validation zero-shot logits (labels of the
    validation split only), so the miniature starts, like the paper's CLIP, from a calibrated zero-shot model."""
    with torch.no_grad():
        t = tuner.learner.text_features()
        z = (tuner.logit_scale * val_bank[:, 0] @ t.T).numpy()
        temp = fit_temperature(z, yv)
        tuner.clip.logit_scale.data = tuner.clip.logit_scale.data - float(np.log(temp))
    return temp


def test_bank_clean(tuner, splits) -> torch.Tensor:
    """Features of the clean test images (view 0 only) for the clean zero-shot accuracy."""
    with torch.no_grad():
        old = tuner.n_views
        tuner.n_views = 1
        try:
            return torch.stack([tuner.view_features(x, i) for i, x in enumerate(splits.test_clean[0])])
        finally:
            tuner.n_views = old


def bench_rows(tuner, val_bank, yv, test_bank, yt) -> dict[str, Any]:
    """Temperature scaling fitted on validation (label-using oracle): ours and netcal's, when installed."""
    with torch.no_grad():
        t = tuner.learner.text_features()
        zv = (tuner.logit_scale * val_bank[:, 0] @ t.T).numpy()
        zt = (tuner.logit_scale * test_bank[:, 0] @ t.T).numpy()
    temp = fit_temperature(zv, yv)
    probs = torch.tensor(zt / temp).softmax(-1).numpy()
    rows = {"temperature": temp, "ece_ts": ece20(probs, yt), "acc_ts": accuracy(probs, yt)}
    try:
        from netcal.scaling import TemperatureScaling

        # float64: netcal's scipy fit takes finite differences of a torch loss; on float32 input it sees a flat
        # loss and stays at T = 1 (it did in the first scale=cpu run)
        ts = TemperatureScaling()
        ts.fit(torch.tensor(zv, dtype=torch.float64).softmax(-1).numpy(), yv)
        rows["ece_ts_netcal"] = ece20(
            ts.transform(torch.tensor(zt, dtype=torch.float64).softmax(-1).numpy()), yt
        )
    except ImportError:
        rows["netcal"] = "not installed"
    return rows


def torchmetrics_ece(probs, labels) -> float | None:
    """torchmetrics' multiclass calibration error (20 bins, l1) ×100, or None when it is not installed."""
    try:
        from torchmetrics.functional.classification import multiclass_calibration_error
    except ImportError:
        return None
    p = torch.tensor(probs, dtype=torch.float64)
    return 100.0 * float(
        multiclass_calibration_error(p, torch.tensor(labels), num_classes=p.shape[1], n_bins=20, norm="l1")
    )
