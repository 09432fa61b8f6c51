"""Per-architecture gate registry: where the MoE router of each decoder layer lives.

Keyed by ``config.model_type``. Raw router logits are recomputed from the gate *input* (see `routing`), so
the registry only needs the module path of the layers and of the gate inside a layer. We do not read
``output_router_logits``: several transformers releases returned softmax probabilities under that name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iclr26_core.errors import UserError


@dataclass(frozen=True)
class RouterSpec:
    """``layers``: dotted path from the top model to the decoder layer list; ``gate``: dotted path in a layer.

    ``moe_layers``: a config attribute naming the number of leading dense layers (DeepSeek's
    ``first_k_dense_replace``), or None when every layer is MoE.
    """

    layers: str
    gate: str
    moe_layers: str | None = None


_REGISTRY: dict[str, RouterSpec] = {
    "olmoe": RouterSpec("model.layers", "mlp.gate"),
    "mixtral": RouterSpec("model.layers", "mlp.gate"),
    "qwen2_moe": RouterSpec("model.layers", "mlp.gate"),
    "qwen3_moe": RouterSpec("model.layers", "mlp.gate"),
    "gpt_oss": RouterSpec("model.layers", "mlp.router"),
    "deepseek_v2": RouterSpec("model.layers", "mlp.gate", "first_k_dense_replace"),
    "deepseek_v3": RouterSpec("model.layers", "mlp.gate", "first_k_dense_replace"),
}

# default LoRA targets per architecture (spec Method step 5); DeepSeek's queries: see `lora_defaults`
LORA_TARGETS: dict[str, tuple[list[str], int]] = {
    "olmoe": (["q_proj", "v_proj"], 8),
    "mixtral": (["q_proj", "v_proj"], 8),
    "qwen2_moe": (["q_proj", "k_proj", "v_proj", "o_proj"], 32),
    "qwen3_moe": (["q_proj", "k_proj", "v_proj", "o_proj"], 32),
    "gpt_oss": (["q_proj", "k_proj", "v_proj", "o_proj"], 32),
    "deepseek_v2": (["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"], 32),
    "deepseek_v3": (["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"], 32),
}


def register_router(model_type: str, layers: str, gate: str, moe_layers: str | None = None) -> None:
    """Register (or replace) the gate location of an architecture, e.g. ``register_router("my_moe",
    "model.layers", "block_sparse_moe.gate")``."""
    _REGISTRY[model_type] = RouterSpec(layers, gate, moe_layers)


def supported() -> list[str]:
    return sorted(_REGISTRY)


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _base(model: Any) -> Any:
    """Unwrap a peft model to the transformers model."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def find_gates(model: Any) -> list[tuple[int, Any]]:
    """[(layer index, gate module)] of every MoE layer of ``model`` (peft-wrapped or not).

    Raises `UserError` with one line for a model without a registered router.
    """
    base = _base(model)
    model_type = getattr(getattr(base, "config", None), "model_type", None)
    spec = _REGISTRY.get(model_type)
    msg = (
        f"no MoE router found in model_type {model_type!r}; supported: {', '.join(supported())}; "
        "see register_router"
    )
    if spec is None:
        raise UserError(msg)
    layers = _get(base, spec.layers)
    if layers is None:
        raise UserError(msg)
    first = int(getattr(base.config, spec.moe_layers, 0) or 0) if spec.moe_layers else 0
    gates = []
    for i, layer in enumerate(layers):
        if i < first:
            continue
        g = _get(layer, spec.gate)
        if g is not None and getattr(g, "weight", None) is not None:
            gates.append((i, g))
    if not gates:
        raise UserError(msg)
    return gates


def lora_defaults(model: Any) -> tuple[list[str], int]:
    """(target modules, alpha) for LoRA rank 8 on this architecture (q/v with alpha 8 by default).

    DeepSeek-V2/V3 with ``q_lora_rank`` set (V3's default 1536, V2's released checkpoints) have no ``q_proj``:
    their queries are ``q_a_proj`` → norm → ``q_b_proj``, so those two are targeted instead.
    """
    config = _base(model).config
    model_type = getattr(config, "model_type", None)
    targets, alpha = LORA_TARGETS.get(model_type, (["q_proj", "v_proj"], 8))
    if model_type in ("deepseek_v2", "deepseek_v3") and getattr(config, "q_lora_rank", None):
        targets = ["q_a_proj", "q_b_proj"] + [t for t in targets if t != "q_proj"]
    return list(targets), alpha


def check_lora_targets(model: Any, targets: Any) -> None:
    """Refuse (one line) LoRA target names that match no module of ``model``: peft only fails when *none*
    matches, so a wrong name among right ones would silently leave those weights un-adapted. ``targets``: a
    list of module-name suffixes (peft's rule: the name or its last dotted part) or a regex string."""
    import re

    names = [n for n, _ in _base(model).named_modules() if n]
    if isinstance(targets, str):
        if not any(re.fullmatch(targets, n) for n in names):
            raise UserError(f"LoRA target_modules regex {targets!r} matches no module of the model")
        return
    if targets is None:
        return
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        leaves = sorted({n.rsplit(".", 1)[-1] for n in names if "proj" in n.rsplit(".", 1)[-1]})
        raise UserError(
            f"LoRA target(s) {', '.join(missing)} match no module of this model "
            f"(model_type {getattr(_base(model).config, 'model_type', None)!r}; its projections: "
            f"{', '.join(leaves) or 'none'})"
        )
