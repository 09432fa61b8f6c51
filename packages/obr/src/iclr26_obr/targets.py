"""Which modules of a `transformers` model get compressed, where its decoder layers are, what storage costs.

Targets are ``nn.Linear`` and GPT-2's ``Conv1D`` (weight stored [in, out]; compressed as its transpose) inside
the decoder layers; ``lm_head``, embeddings, weights tied to an embedding and names in ``skip`` are left alone.
"""

from __future__ import annotations

import fnmatch
import math

from torch import nn

from iclr26_core.errors import UserError

LAYER_PATHS = ("model.layers", "transformer.h", "model.decoder.layers", "gpt_neox.layers")


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    """A skip entry matches a name exactly, as a dotted component or as an fnmatch glob."""
    parts = name.split(".")
    return any(name == p or p in parts or fnmatch.fnmatchcase(name, p) for p in patterns)


def decoder_layers(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """(path, layers) of the model's stack of decoder blocks (Llama/Qwen2/Mistral ``model.layers``, GPT-2 ``h``)."""
    for path in LAYER_PATHS:
        try:
            obj = model.get_submodule(path)
        except AttributeError:
            continue
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return path, obj
    raise UserError(
        f"cannot find the decoder layers of {type(model).__name__} (looked for {', '.join(LAYER_PATHS)}); "
        "supported: Llama, Qwen2, Mistral, GPT-2 style causal LMs"
    )


def layer_targets(
    model: nn.Module, layer: nn.Module, prefix: str, skip: tuple[str, ...]
) -> tuple[list[tuple[str, nn.Module, str]], list[dict[str, str]]]:
    """(targets, skipped) in one decoder layer; targets are ``(full name, module, kind)``."""
    from iclr26_core.models import linear_targets

    return linear_targets(model, lambda name: matches(name, skip), within=layer, prefix=prefix)


def storage_bits(cin: int, sparsity: float, bits: int | None, nm: tuple[int, int] | None) -> dict[str, float]:
    """Bits per weight of the cheapest storage format, mask/metadata and one fp16 scale per row included.

    dense: every value at b bits (zeros included); bitmask: 1 bit per weight + b bits per kept weight; N:M:
    b + ⌈log2 M⌉ bits per kept weight (the index inside its group; 2:4 → 3 bits/weight at b = 4). Without
    quantisation b = 16 and there is no scale. Unstructured sparsity saves nothing without sparse kernels: the
    dense format is listed as well.
    """
    b = 16 if bits is None else bits
    scale = 0.0 if bits is None else 16.0 / cin
    kept = 1.0 - sparsity
    formats = {"dense": b + scale}
    if nm is not None:
        n, m = nm
        formats[f"{n}:{m}"] = n / m * (b + math.ceil(math.log2(m))) + scale
    elif sparsity > 0:
        formats["bitmask"] = 1.0 + kept * b + scale
    best = min(formats, key=formats.get)
    return {"format": best, "bits_per_weight": formats[best], "dense_bits_per_weight": formats["dense"]}
