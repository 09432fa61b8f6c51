"""The miniature experiments behind the claims: data, one training arm, the speed table, the zero-cost check.

Each function is explicit and returns plain numbers; `reproduce` turns them into claims.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from .config import GRQAConfig
from .data import DOMAINS, TARGET_DOMAINS, shapes_arrays, shapes_domains
from .inference import confusion_matrix, iou_per_class, miou, predict
from .train import SegTrainConfig, train_segmenter


def make_data(cfg: Any) -> dict[str, Any]:
    """Source training set, and held-out scenes rendered in every domain (identical labels across domains)."""
    d, seed = cfg.data, int(cfg.seed)
    train_images, train_labels = shapes_arrays(int(d.n_train), "source", int(d.size), seed=1_000 + seed)
    test_images, test_labels = shapes_domains(int(d.n_test), DOMAINS, int(d.size), seed=2_000 + seed)
    return {"train": (train_images, train_labels), "test": test_images, "test_labels": test_labels}


def score_domains(model: Any, data: dict[str, Any], num_classes: int) -> dict[str, Any]:
    """Per-domain mIoU (dataset-level confusion matrix, 255 ignored), per-class IoU, the predictions, and the
    mean over the target domains."""
    from .data import to_pixel_values

    out: dict[str, Any] = {"miou": {}, "iou": {}, "pred": {}}
    for dom, images in data["test"].items():
        pred = predict(model, to_pixel_values(images)).numpy()
        conf = confusion_matrix(pred, data["test_labels"], num_classes)
        out["miou"][dom] = miou(conf)
        out["iou"][dom] = iou_per_class(conf).tolist()
        out["pred"][dom] = pred
    out["target"] = float(np.mean([out["miou"][t] for t in TARGET_DOMAINS]))
    return out


BACKBONE_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "patch_size",
    "num_register_tokens",
    "train_num_points",
)


def qprompt_model(
    cfg: Any,
    seed: int,
    *,
    image_size: int | None = None,
    num_queries: int | None = None,
    num_blocks: int | None = None,
):
    """The configured tiny QPrompt (``cfg.model``), randomly initialised with ``seed``."""
    from .model import build_qprompt

    m = cfg.model
    backbone = {k: m[k] for k in BACKBONE_KEYS}
    backbone["image_size"] = int(image_size or cfg.data.size)
    return build_qprompt(
        int(cfg.data.num_classes),
        backbone=backbone,
        num_queries=int(num_queries or m.num_queries),
        num_blocks=int(num_blocks or m.num_blocks),
        mask_annealing=bool(m.mask_annealing),
        seed=seed,
    )


def grqa_config(cfg: Any, **changes: Any) -> GRQAConfig:
    """``cfg.grqa`` as a `GRQAConfig`, with ``changes`` (e.g. another objective and λ) applied."""
    from omegaconf import OmegaConf

    return GRQAConfig(**{**OmegaConf.to_container(cfg.grqa, resolve=True), **changes})


def train_arm(
    cfg: Any, data: dict[str, Any], model: Any, seed: int, grqa: GRQAConfig | None, desc: str
) -> dict[str, Any]:
    """Train one arm on the source domain, score every domain; the held-out source mIoU along the way."""
    t = cfg.train
    num_classes = int(cfg.data.num_classes)
    curve: list[tuple[int, float]] = []
    src = {"test": {"source": data["test"]["source"]}, "test_labels": data["test_labels"]}

    def source_miou(m: Any) -> float:
        value = score_domains_source(m, src, num_classes)
        curve.append((len(curve), value))
        return value

    tc = SegTrainConfig(
        steps=int(t.steps),
        batch_size=int(t.batch_size),
        lr=float(t.lr),
        weight_decay=float(t.weight_decay),
        seed=seed,
        device=str(cfg.device),
        desc=desc,
        eval_every=int(t.eval_every),
    )
    model, result = train_segmenter(model, *data["train"], tc, grqa, eval_fn=source_miou)
    scores = score_domains(model, data, num_classes)
    every = int(t.eval_every) or int(t.steps)
    scores["curve"] = [
        [every * (i + 1) if i + 1 < len(curve) else int(t.steps), v] for i, (_, v) in enumerate(curve)
    ]
    scores["final_loss"] = float(np.mean(result.losses[-20:]))
    scores["seconds"] = result.seconds
    scores["model"] = model
    return scores


def score_domains_source(model: Any, src: dict[str, Any], num_classes: int) -> float:
    from .data import to_pixel_values

    pred = predict(model, to_pixel_values(src["test"]["source"])).numpy()
    return miou(confusion_matrix(pred, src["test_labels"], num_classes))


def not_converged(curve: list[list[float]], tolerance: float) -> bool:
    """The held-out source mIoU rose by more than ``tolerance`` over the last half of training."""
    if len(curve) < 2:
        return False
    last = curve[-1][1]
    half = curve[-1][0] / 2
    before = [v for s, v in curve if s <= half] or [curve[0][1]]
    return last - before[-1] > tolerance


def speed_table(cfg: Any) -> dict[str, dict[str, float]]:
    """C1: FLOP overhead of the head over the backbone, and the timed ms, of QPrompt, EoMT-4 and Mask2Former."""
    from .model import tiny_mask2former
    from .speed import head_overhead, measure_fps

    s = cfg.speed
    size = (int(s.image_size), int(s.image_size))
    models = {
        "QPrompt": qprompt_model(
            cfg, 0, image_size=int(s.image_size), num_queries=int(s.num_queries), num_blocks=1
        ),
        "EoMT-4": qprompt_model(
            cfg,
            0,
            image_size=int(s.image_size),
            num_queries=int(s.num_queries),
            num_blocks=int(s.eomt_blocks),
        ),
        "Mask2Former": tiny_mask2former(
            int(cfg.data.num_classes),
            num_queries=int(s.m2f_queries),
            encoder_layers=int(s.m2f_encoder_layers),
            decoder_layers=int(s.m2f_decoder_layers),
            hidden=int(s.m2f_hidden),
        ),
    }
    table = {}
    for name, model in models.items():
        row = head_overhead(model, size)
        fps = measure_fps(model, size, warmup=int(s.warmup), iters=int(s.iters))
        row.update(ms=fps.ms_median, ms_iqr=fps.ms_iqr, fps=fps.fps, timed=fps.timed, threads=fps.threads)
        row["params"] = sum(p.numel() for p in model.parameters())
        row["image_size"] = size[0]
        table[name] = row
    return table


def zero_cost(cfg: Any, trained: Any, images: np.ndarray) -> dict[str, Any]:
    """C4: ``with_grqa(model).unwrap()`` against a plain QPrompt with the same weights: keys, parameter count,
    FLOPs and logits (bit-identical), and the saved inference model's keys."""
    import tempfile

    from safetensors.torch import load_file

    from .data import to_pixel_values
    from .plugin import with_grqa
    from .speed import count_flops

    unwrapped = with_grqa(copy.deepcopy(trained), grqa_config(cfg)).unwrap().eval()
    plain = qprompt_model(cfg, 12345).eval()
    plain_keys = sorted(plain.state_dict())
    plain.load_state_dict(trained.state_dict())
    x = to_pixel_values(images[:8])
    with torch.inference_mode():
        a, b = unwrapped(x), plain(x)
    with tempfile.TemporaryDirectory() as tmp:
        unwrapped.save_pretrained(tmp)
        saved = sorted(load_file(f"{tmp}/model.safetensors"))
    one = x[:1]
    return {
        "same_keys": sorted(unwrapped.state_dict()) == plain_keys,
        "saved_keys_equal": saved == sorted(k for k in plain_keys if k in saved) and len(saved) > 0,
        "params_grqa": sum(p.numel() for p in unwrapped.parameters()),
        "params_plain": sum(p.numel() for p in plain.parameters()),
        "flops_grqa": count_flops(unwrapped, one),
        "flops_plain": count_flops(plain, one),
        "max_abs_diff_masks": float((a.masks_queries_logits - b.masks_queries_logits).abs().max()),
        "max_abs_diff_classes": float((a.class_queries_logits - b.class_queries_logits).abs().max()),
        "bit_identical": bool(
            torch.equal(a.masks_queries_logits, b.masks_queries_logits)
            and torch.equal(a.class_queries_logits, b.class_queries_logits)
        ),
    }
