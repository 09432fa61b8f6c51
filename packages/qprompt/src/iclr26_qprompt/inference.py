"""Semantic inference from query predictions, and mIoU from a dataset-level confusion matrix.

Semantic inference (Mask2Former/EoMT): S(c, u) = Σ_k softmax(c_k)[c] · σ(M_k(u)) over the C real classes (the
no-object column is dropped), mask logits bilinearly resized to H×W; the prediction is argmax_c S.

mIoU convention (stated with every number): one confusion matrix over all pixels of the set; pixels labelled 255
are ignored; IoU_c = TP / (TP + FP + FN); classes absent from both ground truth and prediction over the whole set
are excluded from the mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

IGNORE = 255


def semantic_inference(
    class_logits: torch.Tensor, mask_logits: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    """class_logits [B, K, C+1], mask_logits [B, K, h, w] -> predicted classes [B, H, W] (long)."""
    probs = class_logits.softmax(-1)[..., :-1]
    masks = F.interpolate(mask_logits, size=tuple(size), mode="bilinear", align_corners=False).sigmoid()
    return torch.einsum("bkc,bkhw->bchw", probs, masks).argmax(1)


def predict(model: Any, pixel_values: torch.Tensor, batch_size: int = 32) -> torch.Tensor:
    """Predicted label maps [B, H, W] of a query model (EoMT/Mask2Former) or a dense model (logits [B, C, H, W])."""
    out = []
    size = tuple(pixel_values.shape[-2:])
    model.eval()
    device = next(model.parameters()).device
    with torch.inference_mode():
        for i in range(0, len(pixel_values), batch_size):
            x = pixel_values[i : i + batch_size].to(device)
            out.append(postprocess(model(x), size).cpu())
    return torch.cat(out)


def postprocess(outputs: Any, size: tuple[int, int]) -> torch.Tensor:
    """Model outputs -> label maps: query outputs through `semantic_inference`, dense logits through argmax."""
    if hasattr(outputs, "masks_queries_logits"):
        return semantic_inference(outputs.class_queries_logits, outputs.masks_queries_logits, size)
    logits = outputs if isinstance(outputs, torch.Tensor) else outputs.logits
    if tuple(logits.shape[-2:]) != tuple(size):
        logits = F.interpolate(logits, size=tuple(size), mode="bilinear", align_corners=False)
    return logits.argmax(1)


def confusion_matrix(pred: Any, target: Any, num_classes: int, ignore_index: int = IGNORE) -> np.ndarray:
    """[C, C] counts (rows: ground truth, columns: prediction) over all pixels; ``ignore_index`` pixels dropped."""
    pred = np.asarray(pred).ravel().astype(np.int64)
    target = np.asarray(target).ravel().astype(np.int64)
    keep = target != ignore_index
    pred, target = pred[keep], target[keep]
    return np.bincount(target * num_classes + pred, minlength=num_classes**2).reshape(
        num_classes, num_classes
    )


def iou_per_class(conf: np.ndarray) -> np.ndarray:
    """IoU of each class; NaN for a class absent from both ground truth and prediction."""
    tp = np.diag(conf).astype(float)
    union = conf.sum(0) + conf.sum(1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, tp / np.maximum(union, 1), np.nan)


def miou(conf: np.ndarray) -> float:
    """Mean IoU over the classes present in ground truth or prediction."""
    ious = iou_per_class(conf)
    return float(np.nanmean(ious)) if np.isfinite(ious).any() else float("nan")


def evaluate(model: Any, images: np.ndarray, labels: np.ndarray, num_classes: int) -> dict[str, Any]:
    """mIoU and per-class IoU of ``model`` on uint8 images [N, H, W, 3] with label maps [N, H, W]."""
    from .data import to_pixel_values

    pred = predict(model, to_pixel_values(images)).numpy()
    conf = confusion_matrix(pred, labels, num_classes)
    return {"miou": miou(conf), "iou": iou_per_class(conf).tolist(), "pred": pred}
