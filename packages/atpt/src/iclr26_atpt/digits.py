"""Offline data and model for the miniature: scikit-learn digits (16×16 RGB), their rotated + noisy "shifted"
versions, the test-time views, a BPE tokenizer over the prompt words and a tiny CLIP trained on the digits.

Views of one image come from a generator seeded by (seed, the image's index), so a prediction never depends on
the order of the test set. View 0 is the image itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
CTX_INIT = "a photo of a"
TEMPLATE = CTX_INIT + " {}."  # CLIP's prompt form, full stop included (the toy is trained on these prompts)
IMAGE_SIZE = 16


@dataclass
class DigitSplits:
    train: tuple[torch.Tensor, torch.Tensor]  # images [N, 3, 16, 16] in [0, 1], labels [N]
    val: tuple[torch.Tensor, torch.Tensor]  # shifted
    test: tuple[torch.Tensor, torch.Tensor]  # shifted
    test_clean: tuple[torch.Tensor, torch.Tensor]


def digit_images() -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 digits as [N, 3, 16, 16] float in [0, 1] (bilinear upsampling of the 8×8 originals)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 16.0
    x = F.interpolate(x, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False).clamp(0, 1)
    return x.repeat(1, 3, 1, 1), torch.tensor(d.target, dtype=torch.long)


def shift(images: torch.Tensor, seed: int, max_deg: float = 20.0, noise: float = 0.2) -> torch.Tensor:
    """Rotation U(−20°, 20°) (scipy, order 1, no reshape), then N(0, 0.2²) noise, clipped to [0, 1]."""
    from scipy.ndimage import rotate

    rng = np.random.default_rng(seed)
    out = []
    for img in images.numpy():
        angle = rng.uniform(-max_deg, max_deg)
        r = rotate(img, angle, axes=(1, 2), order=1, reshape=False, mode="constant", cval=0.0)
        out.append(np.clip(r + rng.normal(0.0, noise, size=r.shape), 0.0, 1.0))
    return torch.tensor(np.stack(out), dtype=torch.float32)


def digit_splits(seed: int = 0, n_test: int | None = None, n_val: int | None = None) -> DigitSplits:
    """Stratified seeded split 60/10/30; validation and test are shifted (test also kept clean)."""
    from sklearn.model_selection import train_test_split

    x, y = digit_images()
    idx = np.arange(len(y))
    tr, rest = train_test_split(idx, train_size=0.6, stratify=y.numpy(), random_state=seed)
    va, te = train_test_split(rest, train_size=0.25, stratify=y.numpy()[rest], random_state=seed)
    va, te = va[:n_val] if n_val else va, te[:n_test] if n_test else te
    return DigitSplits(
        train=(x[tr], y[tr]),
        val=(shift(x[va], seed + 1000), y[va]),
        test=(shift(x[te], seed + 2000), y[te]),
        test_clean=(x[te], y[te]),
    )


def make_views(
    image: torch.Tensor, n_views: int, generator: torch.Generator, mode: str = "augmix"
) -> torch.Tensor:
    """[3, H, W] in [0, 1] → [n_views, 3, H, W]; view 0 is the image.

    ``augmix`` (our analogue): shift ±2 px, rotation ±10°, brightness ×U(0.8, 1.2), contrast jitter ×U(0.8, 1.2)
    around the mean. ``crop``: random resized crop, area scale U(0.6, 1.0), back to H×W.
    """
    c, h, w = image.shape
    k = n_views - 1
    if k <= 0:
        return image[None].clone()
    u = torch.rand(k, 6, generator=generator)
    if mode == "augmix":
        ang = (u[:, 0] * 2 - 1) * math.radians(10.0)
        tx, ty = (u[:, 1] * 2 - 1) * 2 * 2 / w, (u[:, 2] * 2 - 1) * 2 * 2 / h
        cos, sin = torch.cos(ang), torch.sin(ang)
        theta = torch.stack([torch.stack([cos, -sin, tx], 1), torch.stack([sin, cos, ty], 1)], 1)
    elif mode == "crop":
        s = (0.6 + 0.4 * u[:, 0]).sqrt()
        tx, ty = (u[:, 1] * 2 - 1) * (1 - s), (u[:, 2] * 2 - 1) * (1 - s)
        zero = torch.zeros_like(s)
        theta = torch.stack([torch.stack([s, zero, tx], 1), torch.stack([zero, s, ty], 1)], 1)
    else:
        raise ValueError(f"unknown augment {mode!r}; choose augmix or crop")
    grid = F.affine_grid(theta, [k, c, h, w], align_corners=False)
    v = F.grid_sample(image[None].expand(k, -1, -1, -1), grid, mode="bilinear", align_corners=False)
    if mode == "augmix":
        mean = v.mean(dim=(1, 2, 3), keepdim=True)
        v = (v - mean) * (0.8 + 0.4 * u[:, 3, None, None, None]) + mean
        v = v * (0.8 + 0.4 * u[:, 4, None, None, None])
    return torch.cat([image[None], v.clamp(0, 1)])


def view_generator(seed: int, index: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) * 1_000_003 + int(index))


def prompt_tokenizer(words=(*DIGIT_NAMES,), template: str = TEMPLATE, vocab_size: int = 320):
    """The core's byte-level BPE trained on the prompts, so every word is one token, appending EOS (id 0)."""
    from tokenizers.processors import TemplateProcessing

    from iclr26_core.tokenizers import train_bpe

    texts = [template.format(w) for w in words] * 20
    tok = train_bpe(vocab_size=vocab_size, texts=texts, cache=False)
    eos = tok.eos_token
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, tok.eos_token_id)]
    )
    return tok


def toy_clip_config(vocab_size: int, eos_token_id: int, pad_token_id: int):
    """The spec's toy CLIP: hidden 64, 2 layers, 2 heads, MLP 256 in both towers, projection 32, 16×16 images, patch 4."""
    from transformers import CLIPConfig

    tower = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256)
    text = dict(
        tower,
        vocab_size=vocab_size,
        max_position_embeddings=16,
        eos_token_id=eos_token_id,
        bos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )
    vision = dict(tower, image_size=IMAGE_SIZE, patch_size=4)
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)


def toy_processor():
    """A CLIPImageProcessor for 16×16 digits (mean 0.5, std 0.5), saved beside the toy model."""
    from transformers import CLIPImageProcessor

    return CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        do_convert_rgb=True,
    )


def features(out) -> torch.Tensor:
    """Projected features from get_image/text_features: a tensor (transformers 4.x) or ``.pooler_output`` (≥ 5)."""
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def train_toy_clip(
    splits: DigitSplits,
    steps: int = 1500,
    seed: int = 0,
    lr: float = 1e-3,
    batch: int = 64,
    progress: bool = True,
    logit_scale: float | None = None,
):
    """(model, tokenizer) — the toy CLIP trained with the class-prompt contrastive CE on the digits (Adam).

    ``logit_scale``: None trains s = exp(logit_scale) from 1/0.07; a number fixes s to it (OpenAI CLIP's s sits at
    its clamp, 100)."""
    from transformers import CLIPModel

    from iclr26_core.train import TrainConfig, train_lm

    tok = prompt_tokenizer()
    cfg = toy_clip_config(len(tok), tok.eos_token_id, tok.pad_token_id)
    torch.manual_seed(seed)
    model = CLIPModel(cfg)
    if logit_scale is not None:
        model.logit_scale.data.fill_(math.log(float(logit_scale)))
        model.logit_scale.requires_grad_(False)
    ids = tok([TEMPLATE.format(w) for w in DIGIT_NAMES], padding=True, return_tensors="pt")["input_ids"]
    x, y = splits.train

    def batches(step: int):
        g = torch.Generator().manual_seed(seed * 100_003 + step)
        idx = torch.randint(0, len(y), (batch,), generator=g)
        shifts = torch.randint(-1, 2, (2,), generator=g).tolist()
        return torch.roll(x[idx], shifts=shifts, dims=(2, 3)), y[idx]

    def loss_fn(m, b):
        img, lab = b
        f = F.normalize(features(m.get_image_features(pixel_values=(img - 0.5) / 0.5)), dim=-1)
        t = F.normalize(features(m.get_text_features(input_ids=ids.to(img.device))), dim=-1)
        return F.cross_entropy(m.logit_scale.exp() * f @ t.T, lab)

    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    tcfg = TrainConfig(
        steps=steps,
        batch_size=batch,
        lr=lr,
        grad_clip=None,
        seed=seed,
        device="cpu",
        progress=progress,
        desc=f"toy CLIP (seed {seed})",
    )
    res = train_lm(
        model, None, cfg=tcfg, loss_fn=loss_fn, batches=batches, lr_schedule=lambda s: 1.0, optimizer=opt
    )
    model.eval()
    return model, tok, float(np.mean(res.losses[-50:]))
