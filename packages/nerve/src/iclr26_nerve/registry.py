"""Where NerVE hooks each architecture's FFN: a registry keyed by ``config.model_type``.

PreAct is the *output* of the ``pre`` module (the input of σ); PostAct is the *input* of the ``post``
module (the down projection). Hooking module outputs/inputs sidesteps GPT-2's transposed Conv1D weights.

Gated FFNs (SwiGLU/GeGLU) have three candidate PreAct points; NerVE (and the official code) uses the
gate branch W_gate·x. ``gated_pre`` selects another one:

* ``"gate"``          W_gate·x                       (default, as the paper)
* ``"up"``            W_up·x
* ``"product_input"`` σ(W_gate·x), the activated gate entering the product (our reading of the term)

PostAct of a gated FFN is σ(W_gate·x) ⊙ (W_up·x), the input of ``down_proj``. Phi-3 fuses gate and up in
``gate_up_proj``; its first half is the gate (inferred from the code, ``gate, up = chunk(2)``).

Mixture-of-experts FFNs are refused with a clear error: pooling experts silently would be wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import NerVEError


@dataclass(frozen=True)
class ArchSpec:
    """Dotted paths: ``blocks`` from the model root; the others relative to one block."""

    blocks: str
    pre: str
    post: str
    gated: bool = False
    split: str | None = None  # "first_half" | "second_half" of the ``pre`` output (fused projections)
    up: str | None = None  # gated: the up projection (for gated_pre="up")
    up_split: str | None = None
    act: str | None = None  # the activation module (for gated_pre="product_input" and the identity control)


_GATED = dict(pre="mlp.gate_proj", post="mlp.down_proj", gated=True, up="mlp.up_proj", act="mlp.act_fn")
REGISTRY: dict[str, ArchSpec] = {
    "gpt2": ArchSpec("transformer.h", "mlp.c_fc", "mlp.c_proj", act="mlp.act"),
    "gpt_neox": ArchSpec("gpt_neox.layers", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", act="mlp.act"),
    "gptj": ArchSpec("transformer.h", "mlp.fc_in", "mlp.fc_out", act="mlp.act"),
    **{
        t: ArchSpec("model.layers", **_GATED)
        for t in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "olmo", "olmo2")
    },
    "phi": ArchSpec("model.layers", "mlp.fc1", "mlp.fc2", act="mlp.activation_fn"),
    "phi3": ArchSpec(
        "model.layers",
        "mlp.gate_up_proj",
        "mlp.down_proj",
        gated=True,
        split="first_half",
        up="mlp.gate_up_proj",
        up_split="second_half",
        act="mlp.activation_fn",
    ),
}
MOE_TYPES = {
    "mixtral",
    "olmoe",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "dbrx",
    "jamba",
    "granitemoe",
    "phimoe",
    "switch_transformers",
    "nllb_moe",
    "gpt_oss",
    "llama4",
}
GATED_PRE = ("gate", "up", "product_input")
SPLITS = (None, "first_half", "second_half")


def register_architecture(
    model_type: str,
    blocks: str,
    pre: str,
    post: str,
    gated: bool = False,
    split: str | None = None,
    *,
    up: str | None = None,
    act: str | None = None,
) -> None:
    """Teach NerVE a new architecture (or override one): dotted module paths, see `ArchSpec`.

    >>> register_architecture("my_model", blocks="backbone.blocks", pre="ffn.w1", post="ffn.w2")
    """
    if split not in SPLITS:
        raise NerVEError(f"split must be one of {SPLITS}, got {split!r}")
    if not all(isinstance(s, str) and s for s in (model_type, blocks, pre, post)):
        raise NerVEError("model_type, blocks, pre and post must be non-empty strings")
    REGISTRY[model_type] = ArchSpec(blocks, pre, post, gated=gated, split=split, up=up, act=act)


def model_type_of(model) -> str:
    """``model.config.model_type``; the class name for a model without a ``config`` (e.g. a
    ``HookedTransformer``), which is then the key to `register_architecture` it under."""
    return str(getattr(getattr(model, "config", None), "model_type", "") or type(model).__name__)


_model_type = model_type_of


def is_moe(model) -> bool:
    cfg = getattr(model, "config", None)
    n_exp = max(int(getattr(cfg, "num_local_experts", 0) or 0), int(getattr(cfg, "num_experts", 0) or 0))
    return _model_type(model) in MOE_TYPES or n_exp > 1


def arch_spec(model, gated_pre: str = "gate") -> ArchSpec:
    """The `ArchSpec` of ``model`` with ``pre`` resolved for ``gated_pre``: the registry's entry, else one
    detected from module names (`detect.detect_architecture`); `NerVEError` if neither fits."""
    mt = _model_type(model)
    if is_moe(model):
        raise NerVEError(
            f"model_type {mt!r} has mixture-of-experts FFNs, which NerVE does not support yet "
            "(pooling experts would mix different FFNs; a per-expert extension is planned)"
        )
    spec = REGISTRY.get(mt)
    if spec is None:
        from .detect import detect_architecture

        spec = detect_architecture(model)
    if spec is None:
        raise NerVEError(
            f"unsupported architecture model_type={mt!r}: no FFN found by module names; add it with "
            "iclr26_nerve.register_architecture(model_type, blocks, pre, post, gated=...) or, on the "
            "command line, --arch blocks=PATH,pre=PATH,post=PATH"
        )
    if gated_pre not in GATED_PRE:
        raise NerVEError(f"gated_pre must be one of {', '.join(GATED_PRE)}, got {gated_pre!r}")
    if gated_pre == "gate" or not spec.gated:
        return spec
    if gated_pre == "up":
        if spec.up is None:
            raise NerVEError(f"gated_pre='up' needs the up projection of {mt!r} (register it with up=...)")
        return replace(spec, pre=spec.up, split=spec.up_split)
    if spec.act is None:
        raise NerVEError(f"gated_pre='product_input' needs the activation module of {mt!r} (act=...)")
    return replace(spec, pre=spec.act, split=None)


def get_path(root, path: str):
    obj = root
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def find_blocks(model, spec: ArchSpec):
    """The ModuleList of blocks: ``spec.blocks`` from the root, or without its first part (a base model)."""
    for path in (spec.blocks, spec.blocks.partition(".")[2]):
        if not path:
            continue
        try:
            return get_path(model, path)
        except (AttributeError, IndexError):
            continue
    raise NerVEError(
        f"{type(model).__name__} has no module {spec.blocks!r}; the registry entry does not fit "
        "this model (fix it with register_architecture)"
    )


def ffn_modules(model, gated_pre: str = "gate") -> tuple[ArchSpec, list]:
    """(spec, [(pre_module, post_module, block), ...] per layer)."""
    spec = arch_spec(model, gated_pre)
    blocks = find_blocks(model, spec)
    out = []
    for i, block in enumerate(blocks):
        try:
            out.append((get_path(block, spec.pre), get_path(block, spec.post), block))
        except AttributeError as exc:
            raise NerVEError(
                f"block {i} of {type(model).__name__} has no {spec.pre!r} / {spec.post!r} "
                f"({exc}); fix the entry with register_architecture"
            ) from None
    return spec, out
