"""`TestTimePromptTuner`: episodic test-time prompt tuning of a CLIP's shared context, per test image.

Per image x: views (x + n_views−1 augmentations) → image features once → logits z_v = s·⟨f̂(x_v), t̂_c⟩ →
L = H(p̄ over the confident views) + regulariser (A-TPT: −λ·AD) → ``steps`` AdamW steps on the context →
predict x with the updated context → reset the context (and the optimiser). Nothing carries over between images,
so predictions do not depend on the order of the test set; the CLIP weights are never changed.

`tune_on_features` is the same step on precomputed view features: `reproduce` computes each image's view features
once and shares them between the methods, so only the regulariser differs between TPT, A-TPT, C-TPT and O-TPT.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .calibration import accuracy, ece20
from .digits import features, make_views, view_generator
from .objectives import REGULARIZERS, angular_diversity, min_pairwise_angle, regularizer_loss, tpt_loss
from .openclip import OpenClipPromptLearner, is_open_clip, open_clip_normalisation, open_clip_to_tensor
from .prompt import PromptLearner
from .validate import DEFAULT_TEMPLATE, AtptError, check_class_names, check_tta


@dataclass
class TTAPrediction:
    logits: torch.Tensor  # [N]
    probs: torch.Tensor  # [N]
    ad: float  # angular diversity of the updated text features (radians)
    min_angle_deg: float


def tune_on_features(
    learner: PromptLearner,
    view_feats: torch.Tensor,
    logit_scale: float,
    *,
    regularizer: str = "atpt",
    lam: float = 10.0,
    steps: int = 1,
    lr: float = 5e-3,
    selection: float = 0.1,
) -> TTAPrediction:
    """One episode on normalised view features [V, P] (row 0 = the original image); resets before and after."""
    if regularizer not in REGULARIZERS:
        raise AtptError(f"unknown regularizer {regularizer!r}; choose one of {', '.join(REGULARIZERS)}")
    learner.reset()
    if steps > 0:
        opt = torch.optim.AdamW([learner.ctx], lr=lr)
        for _ in range(steps):
            t = learner.text_features()
            loss = tpt_loss(logit_scale * view_feats @ t.T, selection)
            if regularizer != "none":
                loss = loss + regularizer_loss(regularizer, t, lam)
            if not torch.isfinite(loss):
                raise AtptError(f"the TTA loss is {float(loss)} (check selection and the model's features)")
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        t = learner.text_features()
        logits = logit_scale * view_feats[0] @ t.T
        pred = TTAPrediction(
            logits,
            logits.softmax(-1),
            float(angular_diversity(t)),
            math.degrees(float(min_pairwise_angle(t))),
        )
    learner.reset()
    return pred


class TestTimePromptTuner:
    """A-TPT (``regularizer="atpt"``), TPT (``none``), C-TPT (``ctpt``) or O-TPT (``otpt``) on a transformers CLIP
    or an open_clip CLIP (then ``processor`` is open_clip's preprocess transform and ``tokenizer`` its tokenizer).

    ``template``: the class prompt, "a photo of a {}." by default (CLIP's and TPT's); the words before ``{}`` are
    the learnable context. ``processor``: the CLIP's image processor (images are resized/cropped by it, views are made in [0, 1] pixel
    space, then normalised with its mean/std). ``augment``: ``augmix`` | ``crop`` | a callable
    ``(image [3,H,W], n_views, generator) -> [n_views, 3, H, W]``.
    """

    __test__ = False  # not a pytest class

    def __init__(
        self,
        clip,
        processor,
        class_names: list[str],
        *,
        regularizer: str = "atpt",
        lam: float = 10.0,
        steps: int = 1,
        lr: float = 5e-3,
        n_views: int = 64,
        selection: float = 0.1,
        augment: str | Callable = "augmix",
        tokenizer=None,
        template: str = DEFAULT_TEMPLATE,
        n_ctx: int | None = None,
        seed: int = 0,
        allow_negative_lambda: bool = False,
    ) -> None:
        check_class_names(class_names)
        check_tta(n_views, selection, lam, allow_negative_lambda)
        if regularizer not in REGULARIZERS:
            raise AtptError(f"unknown regularizer {regularizer!r}; choose one of {', '.join(REGULARIZERS)}")
        if steps < 0:
            raise AtptError(f"steps must be >= 0, got {steps}")
        if not callable(augment) and augment not in ("augmix", "crop"):
            raise AtptError(f"augment must be augmix, crop or a callable, got {augment!r}")
        self.clip = clip.eval()
        self.processor = processor
        tokenizer = tokenizer if tokenizer is not None else getattr(processor, "tokenizer", None)
        if tokenizer is None:
            raise AtptError("a tokenizer is needed (pass tokenizer= or a CLIPProcessor)")
        self.open_clip = is_open_clip(clip)
        learner = OpenClipPromptLearner if self.open_clip else PromptLearner
        self.learner = learner(clip, tokenizer, class_names, template=template, n_ctx=n_ctx)
        self.class_names = list(class_names)
        self.regularizer, self.lam, self.steps, self.lr = regularizer, float(lam), int(steps), float(lr)
        self.n_views, self.selection, self.augment, self.seed = int(n_views), float(selection), augment, seed
        ip = getattr(processor, "image_processor", processor)
        mean, std = (
            open_clip_normalisation(clip, processor) if self.open_clip else (ip.image_mean, ip.image_std)
        )
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)
        self.ip = ip

    @property
    def logit_scale(self) -> float:
        return float(self.clip.logit_scale.exp())

    def to_tensor(self, image: Any) -> torch.Tensor:
        """A PIL image (processed without normalisation) or a [3, H, W] tensor in [0, 1]."""
        if isinstance(image, torch.Tensor):
            return image.float()
        if self.open_clip:
            return open_clip_to_tensor(self.processor, image)
        px = self.ip(images=image, do_normalize=False, return_tensors="pt")["pixel_values"][0]
        return px.float()

    @torch.no_grad()
    def view_features(self, image: Any, index: int = 0) -> torch.Tensor:
        """Normalised image features of the views of ``image`` [n_views, P]; views seeded by (seed, index)."""
        x = self.to_tensor(image)
        g = view_generator(self.seed, index)
        if callable(self.augment):
            views = self.augment(x, self.n_views, g)
        else:
            views = make_views(x, self.n_views, g, self.augment)
        px = (views - self.mean) / self.std
        if self.open_clip:
            return F.normalize(self.clip.encode_image(px), dim=-1)
        return F.normalize(features(self.clip.get_image_features(pixel_values=px)), dim=-1)

    def predict(self, image: Any, index: int = 0) -> TTAPrediction:
        return tune_on_features(
            self.learner,
            self.view_features(image, index),
            self.logit_scale,
            regularizer=self.regularizer,
            lam=self.lam,
            steps=self.steps,
            lr=self.lr,
            selection=self.selection,
        )

    def evaluate(self, dataset, progress: Callable | None = None) -> dict:
        """Over an iterable of (image, label) or (index, image, label): accuracy and ECE-20 (×100) computed once over
        the whole set, mean AD (degrees) and per-image records."""
        items = list(dataset)
        if items and len(items[0]) == 2:
            items = [(i, im, lab) for i, (im, lab) in enumerate(items)]
        labels = [int(lab) for _, _, lab in items]
        if labels and (min(labels) < 0 or max(labels) >= len(self.class_names)):
            raise AtptError(
                f"labels outside 0..{len(self.class_names) - 1}: the class list does not match the data"
            )
        it = progress(items) if progress else items
        probs, records = [], []
        for idx, image, label in it:
            p = self.predict(image, idx)
            probs.append(p.probs.numpy())
            records.append(
                {
                    "index": int(idx),
                    "label": int(label),
                    "prediction": int(p.probs.argmax()),
                    "confidence": float(p.probs.max()),
                    "ad_deg": math.degrees(p.ad),
                }
            )
        probs = np.stack(probs) if probs else np.zeros((0, len(self.class_names)))
        return {
            "acc": accuracy(probs, labels),
            "ece": ece20(probs, labels),
            "ad_mean": float(np.mean([r["ad_deg"] for r in records])) if records else float("nan"),
            "probs": probs,
            "labels": np.asarray(labels),
            "records": records,
        }
