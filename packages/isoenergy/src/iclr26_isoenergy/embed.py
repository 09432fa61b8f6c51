"""Paired embeddings from a `transformers` dual encoder (CLIP, SigLIP), and a tiny CLIP for offline runs.

`embed_pairs` calls ``get_image_features`` / ``get_text_features`` (the projected features: a tensor in
transformers 4.x, ``.pooler_output`` of the returned output in ≥ 5) and L2-normalises them. SigLIP text is
tokenised with ``padding="max_length"``, as SigLIP was trained.

`tiny_clip()` builds a randomly initialised ``CLIPModel`` (vision: image 16, patch 4, hidden 32, 2 layers; text:
vocabulary 64, hidden 32, 2 layers; projection 32) with a character tokenizer that appends its EOS token, and
``text_config.eos_token_id`` set to that id (otherwise transformers pools at the wrong token). `digit_pairs()`
gives scikit-learn's digits upsampled to 16×16 RGB with templated captions ("a photo of the digit seven").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from .validate import IsoEnergyError

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
ALPHABET = "abcdefghijklmnopqrstuvwxyz "


def _features(out: Any) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.pooler_output


@torch.no_grad()
def embed_pairs(model, processor, images: list, texts: list[str], batch_size: int = 64):
    """(img [N, P], txt [N, P]) unit-norm projected features of N (image, caption) pairs."""
    if len(images) != len(texts):
        raise IsoEnergyError(f"pairs required: {len(images)} images but {len(texts)} captions")
    if not images:
        raise IsoEnergyError("no pairs to embed")
    model_type = str(getattr(model.config, "model_type", ""))
    padding = "max_length" if "siglip" in model_type else True
    device = next(model.parameters()).device
    model.eval()
    out_img, out_txt = [], []
    for i in range(0, len(images), int(batch_size)):
        pix = processor(images=images[i : i + batch_size], return_tensors="pt")["pixel_values"]
        tok = processor(text=texts[i : i + batch_size], return_tensors="pt", padding=padding, truncation=True)
        tok = {k: v.to(device) for k, v in tok.items() if k in ("input_ids", "attention_mask")}
        out_img.append(_features(model.get_image_features(pixel_values=pix.to(device))).float().cpu())
        out_txt.append(_features(model.get_text_features(**tok)).float().cpu())
    return F.normalize(torch.cat(out_img), dim=1), F.normalize(torch.cat(out_txt), dim=1)


def tiny_clip(seed: int = 0):
    """(model, processor): a random-init tiny ``CLIPModel`` and its ``CLIPProcessor`` (module docstring)."""
    from tokenizers.processors import TemplateProcessing
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    from iclr26_core.tokenizers import char_tokenizer

    tok = char_tokenizer(ALPHABET)
    eos = tok.eos_token_id
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"$A {tok.eos_token}", special_tokens=[(tok.eos_token, eos)]
    )
    image_processor = CLIPImageProcessor(size={"shortest_edge": 16}, crop_size={"height": 16, "width": 16})
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tok)
    tower = dict(
        hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=2
    )  # both towers
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=eos, pad_token_id=tok.pad_token_id)
    config = CLIPConfig(
        text_config=dict(tower, vocab_size=64, max_position_embeddings=48, **ids),
        vision_config=dict(tower, image_size=16, patch_size=4),
        projection_dim=32,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIPModel(config)
    return model.eval(), processor


def digit_pairs(n: int | None = None) -> tuple[list, list[str]]:
    """(images, captions): scikit-learn's 8×8 digits upsampled to 16×16 RGB ``PIL.Image``s, and
    "a photo of the digit <name>" captions. ``n``: the first n of the 1,797 digits."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    data, target = digits.images, digits.target
    if n is not None:
        data, target = data[:n], target[:n]
    images = []
    for img in data:
        arr = (img / 16.0 * 255).clip(0, 255).astype("uint8")
        images.append(Image.fromarray(arr).resize((16, 16), Image.BILINEAR).convert("RGB"))
    return images, [f"a photo of the digit {DIGITS[int(t)]}" for t in target]


def read_pairs_jsonl(path: str | Path) -> tuple[list, list[str]]:
    """Images (PIL, RGB) and captions from a JSONL file of {"image": path, "text": caption} lines; image paths
    are relative to the file's folder unless absolute."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        raise IsoEnergyError(f"no pairs file at {str(path)!r}")
    images, texts = [], []
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            image_path, text = Path(row["image"]), str(row["text"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise IsoEnergyError(
                f'{path}:{no}: expected a JSON object {{"image": path, "text": caption}}'
            ) from None
        image_path = image_path if image_path.is_absolute() else path.parent / image_path
        try:
            with Image.open(image_path) as im:
                images.append(im.convert("RGB"))
        except (OSError, UnidentifiedImageError):
            raise IsoEnergyError(f"{path}:{no}: cannot read image {str(image_path)!r}") from None
        texts.append(text)
    if not images:
        raise IsoEnergyError(f"{str(path)!r} holds no pairs")
    return images, texts


def load_dual_encoder(name_or_path: str):
    """(model, processor) of a CLIP/SigLIP model from a local folder or hub id (``tiny-clip``: `tiny_clip`)."""
    if name_or_path == "tiny-clip":
        return tiny_clip()
    from transformers import AutoProcessor
    from transformers.utils import logging as hf_logging

    from iclr26_core.models import load_model

    hf_logging.disable_progress_bar()
    model = load_model(name_or_path, "AutoModel")
    if not hasattr(model, "get_image_features") or not hasattr(model, "get_text_features"):
        raise IsoEnergyError(
            f"{name_or_path!r} is not a dual encoder (no get_image_features/get_text_features)"
        )
    try:
        processor = AutoProcessor.from_pretrained(str(name_or_path))
    except (OSError, ValueError) as exc:
        raise IsoEnergyError(
            f"cannot load the processor of {name_or_path!r} ({str(exc).splitlines()[0]})"
        ) from None
    return model.eval(), processor
