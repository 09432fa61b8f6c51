"""Evaluation metrics shared by the packages. Pure functions; shapes in the docstrings.

Language models: `perplexity`, `mc_accuracy` (multiple-choice log-likelihood). Classification:
`accuracy`, `ece` + `reliability_diagram`. Images: `miou`, `psnr`, `ssim`. Statistics: `bootstrap_ci`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


def _batches(blocks: Any, batch_size: int) -> Iterable[Any]:
    import torch

    if isinstance(blocks, torch.Tensor):
        for i in range(0, len(blocks), batch_size):
            yield blocks[i : i + batch_size]
    else:  # a datasets.Dataset with an input_ids column, or a list of [T] tensors
        for i in range(0, len(blocks), batch_size):
            chunk = blocks[i : i + batch_size]
            ids = chunk["input_ids"] if isinstance(chunk, dict) else chunk
            yield ids if isinstance(ids, torch.Tensor) else torch.as_tensor(ids)


def token_nll(model: Any, input_ids: Any, attention_mask: Any = None) -> tuple[Any, Any]:
    """Per-token negative log-likelihood of next-token prediction.

    input_ids [B, T] → (nll [B, T-1], mask [B, T-1]) in float32; position t scores token t+1.
    """
    import torch
    import torch.nn.functional as F

    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    target = input_ids[:, 1:]
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none")
    nll = nll.view_as(target)
    mask = (
        torch.ones_like(target, dtype=torch.bool) if attention_mask is None else attention_mask[:, 1:].bool()
    )
    return nll, mask


def perplexity(model: Any, blocks: Any, batch_size: int = 16, device: str | None = None) -> float:
    """exp(mean next-token NLL) over all tokens of ``blocks`` ([N, T] int tensor or dataset of input_ids)."""
    import torch

    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for ids in _batches(blocks, batch_size):
            nll, mask = token_nll(model, ids.to(device))
            total += float(nll[mask].double().sum())
            count += int(mask.sum())
    model.train(was_training)
    if count == 0:
        raise ValueError("no tokens to evaluate")
    return math.exp(total / count)


def mc_accuracy(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    choices: Sequence[Sequence[str]],
    answers: Sequence[int],
    normalize: bool = False,
    device: str | None = None,
) -> dict[str, Any]:
    """Multiple-choice accuracy by log-likelihood of each continuation given its question.

    Score of a choice = Σ log p(choice tokens | question) (``normalize=True``: divided by its token count).
    Returns {"accuracy", "predictions", "scores"}.
    """
    import torch

    device = device or next(model.parameters()).device
    preds, all_scores = [], []
    model.eval()
    with torch.no_grad():
        for q, opts in zip(questions, choices, strict=True):
            q_ids = tokenizer(q, add_special_tokens=False)["input_ids"]
            scores = []
            for opt in opts:
                c_ids = tokenizer(opt, add_special_tokens=False)["input_ids"]
                ids = torch.tensor([q_ids + c_ids], device=device)
                logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
                tgt = ids[0, 1:]
                lp = logp.gather(-1, tgt[:, None])[:, 0][len(q_ids) - 1 :]
                s = float(lp.sum())
                scores.append(s / max(len(c_ids), 1) if normalize else s)
            preds.append(int(max(range(len(scores)), key=scores.__getitem__)))
            all_scores.append(scores)
    acc = sum(int(p == a) for p, a in zip(preds, answers, strict=True)) / max(len(answers), 1)
    return {"accuracy": acc, "predictions": preds, "scores": all_scores}


def accuracy(pred: Any, target: Any) -> float:
    """Fraction of equal entries; ``pred`` may be class indices [N] or logits/probabilities [N, C]."""
    import numpy as np

    pred, target = np.asarray(pred), np.asarray(target)
    if pred.ndim == target.ndim + 1:
        pred = pred.argmax(-1)
    if pred.shape != target.shape:
        raise ValueError(f"shape mismatch: pred {pred.shape} vs target {target.shape}")
    return float((pred == target).mean())


def calibration_bins(confidence: Any, correct: Any, n_bins: int = 10) -> dict[str, Any]:
    """Equal-width confidence bins on [0, 1]: per bin count, mean confidence, accuracy (NaN when empty).

    A confidence of exactly 1 falls in the last bin; bin i is (i/n, (i+1)/n] except bin 0 which includes 0.
    """
    import numpy as np

    conf = np.asarray(confidence, dtype=float)
    corr = np.asarray(correct, dtype=float)
    idx = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    counts = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=conf, minlength=n_bins) / counts
        acc = np.bincount(idx, weights=corr, minlength=n_bins) / counts
    return {"edges": np.linspace(0, 1, n_bins + 1), "count": counts, "confidence": mean_conf, "accuracy": acc}


def ece(probs_or_conf: Any, labels_or_correct: Any, n_bins: int = 10) -> float:
    """Expected calibration error Σ_b (n_b/N)·|acc_b − conf_b|.

    Either probabilities [N, C] and labels [N], or confidences [N] and correctness [N] (0/1).
    """
    import numpy as np

    p = np.asarray(probs_or_conf, dtype=float)
    y = np.asarray(labels_or_correct)
    if p.ndim == 2:
        conf, correct = p.max(-1), (p.argmax(-1) == y).astype(float)
    else:
        conf, correct = p, y.astype(float)
    b = calibration_bins(conf, correct, n_bins)
    n = b["count"].sum()
    gaps = np.abs(np.nan_to_num(b["accuracy"]) - np.nan_to_num(b["confidence"]))
    return float((b["count"] / n * gaps).sum())


def reliability_diagram(probs_or_conf: Any, labels_or_correct: Any, n_bins: int = 10, title: str = ""):
    """A matplotlib figure: per-bin accuracy vs confidence with the diagonal, ECE in the title."""
    import numpy as np

    from .report import pyplot

    p = np.asarray(probs_or_conf, dtype=float)
    y = np.asarray(labels_or_correct)
    conf, correct = (p.max(-1), (p.argmax(-1) == y)) if p.ndim == 2 else (p, y)
    b = calibration_bins(conf, correct, n_bins)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4, 4))
    centers = (b["edges"][:-1] + b["edges"][1:]) / 2
    ax.bar(
        centers, np.nan_to_num(b["accuracy"]), width=1 / n_bins, edgecolor="k", alpha=0.7, label="accuracy"
    )
    ax.plot([0, 1], [0, 1], "r--", label="perfect calibration")
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{title} ECE={ece(conf, correct, n_bins):.3f}".strip())
    ax.legend(loc="upper left")
    return fig


def miou(pred: Any, target: Any, n_classes: int, ignore_index: int | None = None) -> float:
    """Mean intersection-over-union over classes present in pred or target. pred/target: int [...] same shape."""
    import numpy as np

    pred, target = np.asarray(pred).ravel(), np.asarray(target).ravel()
    if ignore_index is not None:
        keep = target != ignore_index
        pred, target = pred[keep], target[keep]
    ious = []
    for c in range(n_classes):
        inter = np.sum((pred == c) & (target == c))
        union = np.sum((pred == c) | (target == c))
        if union > 0:
            ious.append(inter / union)
    return float(np.mean(ious)) if ious else float("nan")


def psnr(pred: Any, target: Any, data_range: float = 1.0) -> float:
    """Peak signal-to-noise ratio 10·log10(R²/MSE) in dB (inf for identical inputs)."""
    import numpy as np

    pred, target = np.asarray(pred, dtype=np.float64), np.asarray(target, dtype=np.float64)
    mse = float(np.mean((pred - target) ** 2))
    return float("inf") if mse == 0 else 10 * math.log10(data_range**2 / mse)


def ssim(
    pred: Any, target: Any, data_range: float = 1.0, win_size: int = 7, channel_axis: int | None = None
) -> float:
    """Structural similarity (Wang et al. 2004) with a uniform ``win_size`` window, the scikit-image default.

    pred/target: [H, W] or with a channel axis (``channel_axis``); the mean over channels is returned.
    """
    import numpy as np
    from scipy.ndimage import uniform_filter

    x, y = np.asarray(pred, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"shape mismatch: {x.shape} vs {y.shape}")
    if channel_axis is not None:
        x, y = np.moveaxis(x, channel_axis, -1), np.moveaxis(y, channel_axis, -1)
        return float(np.mean([ssim(x[..., c], y[..., c], data_range, win_size) for c in range(x.shape[-1])]))
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    n = win_size**x.ndim
    cov_norm = n / (n - 1)  # sample covariance, as scikit-image
    f = lambda a: uniform_filter(a, size=win_size)  # noqa: E731
    ux, uy = f(x), f(y)
    vx = cov_norm * (f(x * x) - ux * ux)
    vy = cov_norm * (f(y * y) - uy * uy)
    vxy = cov_norm * (f(x * y) - ux * uy)
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux**2 + uy**2 + c1) * (vx + vy + c2))
    pad = (win_size - 1) // 2
    crop = tuple(slice(pad, d - pad) for d in s.shape)
    return float(s[crop].mean())


def bootstrap_ci(
    values: Any, stat: Any = None, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Percentile bootstrap: (estimate, low, high) of ``stat`` (default: mean) at level 1 − alpha."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    stat = stat or np.mean
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    boots = np.array([stat(x[i]) for i in idx])
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return float(stat(x)), float(lo), float(hi)
