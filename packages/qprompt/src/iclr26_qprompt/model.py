"""QPrompt: a ViT whose learnable queries enter at the final block only (transformers' EoMT with ``num_blocks=1``),
and the tiny Mask2Former baseline.

QPrompt = ``EomtForUniversalSegmentation`` with ``num_blocks=1``: K queries are prepended to the token sequence
[queries, CLS + registers, patches] at the input of block L; that block's joint self-attention is the one
query–image alignment step, then a LayerNorm. Class logits: Linear(D → C+1) of each query; mask logits: the dot
product of MLP₃(query) with the patch tokens upsampled 4× by two transposed-conv blocks. No pixel decoder, no
transformer decoder. EoMT's masked-attention annealing is off (``attn_mask_probs = 0``) unless asked for.
"""

from __future__ import annotations

from typing import Any

from iclr26_core.errors import UserError

TINY_EOMT = dict(
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=2,
    patch_size=8,
    image_size=64,
    num_register_tokens=0,
    num_queries=8,
    num_blocks=1,
    train_num_points=1024,
)
TINY_RESNET = dict(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], layer_type="basic")


def check_sizes(image_size: int, patch_size: int, num_queries: int, num_classes: int) -> None:
    """The user mistakes that would otherwise fail deep inside the model, as one clear line each."""
    if image_size % patch_size:
        raise UserError(f"image_size {image_size} is not a multiple of patch_size {patch_size}")
    if num_queries < num_classes:
        raise UserError(f"num_queries {num_queries} < num_classes {num_classes}: every class needs a query")
    if num_classes < 1:
        raise UserError(f"num_classes must be at least 1, got {num_classes}")


def set_mask_annealing(model: Any, on: bool) -> Any:
    """EoMT's masked attention in the query blocks: probability 1 (on, transformers' initial value) or 0 (off)."""
    if hasattr(model, "attn_mask_probs"):
        model.attn_mask_probs.fill_(1.0 if on else 0.0)
    return model


def build_qprompt(
    num_classes: int,
    *,
    backbone: Any = None,
    num_queries: int = 100,
    num_blocks: int = 1,
    mask_annealing: bool = False,
    seed: int | None = 0,
    **overrides: Any,
):
    """A QPrompt segmenter (``EomtForUniversalSegmentation``) with ``num_classes`` classes (+ no-object).

    backbone: ``None`` (the tiny random config: hidden 64, 4 layers, patch 8, 64×64), an ``EomtConfig`` (random
    init), or an EoMT checkpoint (hub id or local path): its weights are loaded, the queries re-attached to the last
    ``num_blocks`` blocks and the classifier resized to C+1. ``overrides`` set config fields (e.g. image_size).
    With ``backbone=None`` the tiny config's 8 queries are used unless ``num_queries`` is given explicitly.
    """
    import torch
    from transformers import EomtConfig, EomtForUniversalSegmentation

    if isinstance(backbone, str):
        return _from_checkpoint(backbone, num_classes, num_queries, num_blocks, mask_annealing, overrides)
    if backbone is None:
        fields = dict(TINY_EOMT)
        fields["num_queries"] = num_queries if num_queries != 100 else TINY_EOMT["num_queries"]
    else:
        fields = backbone.to_dict() if isinstance(backbone, EomtConfig) else dict(backbone)
        fields["num_queries"] = num_queries
    fields.update(num_blocks=num_blocks, num_labels=num_classes, **overrides)
    for key in ("id2label", "label2id"):
        fields.pop(key, None)
    check_sizes(int(fields["image_size"]), int(fields["patch_size"]), int(fields["num_queries"]), num_classes)
    if not 1 <= num_blocks <= int(fields["num_hidden_layers"]):
        raise UserError(
            f"num_blocks {num_blocks} must lie in 1..num_hidden_layers ({fields['num_hidden_layers']})"
        )
    config = EomtConfig(**{k: v for k, v in fields.items() if not k.startswith("_") and k != "model_type"})
    if seed is not None:
        torch.manual_seed(seed)
    model = EomtForUniversalSegmentation(config)
    return set_mask_annealing(model, mask_annealing).eval()


def _from_checkpoint(
    path: str, num_classes: int, num_queries: int, num_blocks: int, annealing: bool, overrides
):
    import torch
    from transformers import EomtConfig, EomtForUniversalSegmentation

    from iclr26_core.models import load_model

    source = load_model(path, auto_class="AutoModelForUniversalSegmentation")
    if not isinstance(source, EomtForUniversalSegmentation):
        raise UserError(f"{path!r} is not an EoMT checkpoint (got {type(source).__name__})")
    fields = source.config.to_dict()
    fields.update(num_queries=num_queries, num_blocks=num_blocks, num_labels=num_classes, **overrides)
    for key in ("id2label", "label2id", "architectures"):
        fields.pop(key, None)
    check_sizes(int(fields["image_size"]), int(fields["patch_size"]), num_queries, num_classes)
    model = EomtForUniversalSegmentation(EomtConfig(**fields))
    state = {
        k: v
        for k, v in source.state_dict().items()
        if not k.startswith(("query.", "class_predictor.", "criterion.", "attn_mask_probs"))
    }
    missing = model.load_state_dict(state, strict=False).missing_keys
    with torch.no_grad():
        n = min(num_queries, source.query.weight.shape[0])
        model.query.weight[:n] = source.query.weight[:n]
    unexpected = [
        k for k in missing if not k.startswith(("query.", "class_predictor.", "criterion.", "attn_mask"))
    ]
    if unexpected:
        raise UserError(f"{path!r}: backbone weights missing for {unexpected[:3]}")
    return set_mask_annealing(model, annealing).eval()


def tiny_mask2former(
    num_classes: int,
    *,
    num_queries: int = 8,
    encoder_layers: int = 6,
    decoder_layers: int = 10,
    hidden: int = 64,
    seed: int | None = 0,
):
    """A tiny random ``Mask2FormerForUniversalSegmentation``: ResNet backbone (hidden sizes 16–128, one basic block
    per stage), feature/mask/hidden size ``hidden``, ``encoder_layers`` pixel-decoder and ``decoder_layers``
    transformer-decoder layers, ``num_queries`` queries."""
    import torch
    from transformers import Mask2FormerConfig, Mask2FormerForUniversalSegmentation, ResNetConfig

    if num_queries < num_classes:
        raise UserError(f"num_queries {num_queries} < num_classes {num_classes}: every class needs a query")
    backbone = ResNetConfig(**TINY_RESNET, out_features=["stage1", "stage2", "stage3", "stage4"])
    config = Mask2FormerConfig(
        backbone_config=backbone,
        feature_size=hidden,
        mask_feature_size=hidden,
        hidden_dim=hidden,
        encoder_feedforward_dim=4 * hidden,
        dim_feedforward=4 * hidden,
        num_attention_heads=2,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        num_queries=num_queries,
        num_labels=num_classes,
        train_num_points=1024,
    )
    if seed is not None:
        torch.manual_seed(seed)
    return Mask2FormerForUniversalSegmentation(config).eval()


def backbone_forward(model: Any, pixel_values: Any) -> Any:
    """The backbone alone (for FLOP ratios): EoMT's ViT without queries, or Mask2Former's ResNet."""
    if hasattr(model, "embeddings") and hasattr(model, "layers"):
        hidden = model.embeddings(pixel_values)
        for layer in model.layers:
            hidden = layer(hidden, None)
        return model.layernorm(hidden)
    if hasattr(model, "model") and hasattr(model.model, "pixel_level_module"):
        return model.model.pixel_level_module.encoder(pixel_values)
    raise UserError(f"no known backbone in {type(model).__name__}")
