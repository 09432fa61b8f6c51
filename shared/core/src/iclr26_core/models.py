"""Tiny randomly initialised `transformers` models by name, and loaders for real ones.

>>> model = tiny_model("llama")                 # 2 layers, hidden 64, vocab 512
>>> model = tiny_model("olmoe", size="small", num_experts=8)

Sizes are deliberately small; ``tiny`` runs a forward pass in milliseconds on a CPU, ``small`` is the
size used for miniature experiments (hidden 128, 2 layers: ~0.8M parameters for llama with vocab 512).
Any config field can be overridden with keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import UserError

# name -> (config class name, model class name, {size: config kwargs})
# token ids match iclr26_core.tokenizers: 0 = <|endoftext|> (bos/eos), 1 = <pad>
_IDS = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 1}
_TEXT = {"vocab_size": 512, "max_position_embeddings": 256, **_IDS}


def _sizes(tiny: dict[str, Any], **small: Any) -> dict[str, dict[str, Any]]:
    """``{"tiny": tiny, "small": tiny with the fields that grow}``."""
    return {"tiny": tiny, "small": {**tiny, **small}}


_LM = dict(_TEXT, num_hidden_layers=2, num_attention_heads=4)  # what every tiny/small decoder shares
_MOE = {"num_experts_per_tok": 2}
_GPT2 = dict(_IDS, vocab_size=512, n_positions=256, n_embd=64, n_layer=2, n_head=4)
_LLAMA = dict(_LM, hidden_size=64, intermediate_size=176, num_key_value_heads=2)
_NEOX = dict(_LM, hidden_size=64, intermediate_size=256)
_MIXTRAL = dict(
    _LM, hidden_size=64, intermediate_size=128, num_key_value_heads=2, num_local_experts=4, **_MOE
)
_OLMOE = dict(_LM, hidden_size=64, intermediate_size=64, num_key_value_heads=4, num_experts=8, **_MOE)
_VIT = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=64, intermediate_size=128, num_labels=10)
_CLIP_TEXT = dict(
    _IDS, vocab_size=512, max_position_embeddings=64, num_hidden_layers=2, num_attention_heads=4
)
_CLIP_VISION = dict(image_size=32, patch_size=8, num_hidden_layers=2, num_attention_heads=4)
_WIDE = {"hidden_size": 128, "intermediate_size": 256}  # the small size: twice as wide
_SPECS: dict[str, tuple[str, str, dict[str, dict[str, Any]]]] = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", _sizes(_GPT2, n_embd=128)),
    "llama": (
        "LlamaConfig",
        "LlamaForCausalLM",
        _sizes(_LLAMA, **_WIDE | {"intermediate_size": 512, "num_key_value_heads": 4}),
    ),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", _sizes(_NEOX, **_WIDE | {"intermediate_size": 512})),
    "mixtral": (
        "MixtralConfig",
        "MixtralForCausalLM",
        _sizes(_MIXTRAL, **_WIDE, num_key_value_heads=4, num_local_experts=8),
    ),
    "olmoe": (
        "OlmoeConfig",
        "OlmoeForCausalLM",
        _sizes(_OLMOE, **_WIDE | {"intermediate_size": 128, "num_experts": 16, "num_experts_per_tok": 4}),
    ),
    "vit": (
        "ViTConfig",
        "ViTForImageClassification",
        _sizes(
            dict(_VIT, num_hidden_layers=2, num_attention_heads=4), **_WIDE, patch_size=4, num_hidden_layers=4
        ),
    ),
    "clip": (
        "CLIPConfig",
        "CLIPModel",
        {
            "tiny": dict(
                text_config=dict(_CLIP_TEXT, hidden_size=64, intermediate_size=128),
                vision_config=dict(_CLIP_VISION, hidden_size=64, intermediate_size=128),
                projection_dim=32,
            ),
            "small": dict(
                text_config=dict(_CLIP_TEXT, **_WIDE),
                vision_config=dict(_CLIP_VISION, **_WIDE, patch_size=4),
                projection_dim=64,
            ),
        },
    ),
}

MODEL_NAMES = tuple(_SPECS)
SIZES = ("tiny", "small")


def tiny_config(name: str, size: str = "tiny", **overrides: Any):
    """The `transformers` config of a tiny model ``name`` (one of MODEL_NAMES) at ``size``."""
    import transformers

    if name not in _SPECS:
        raise UserError(f"unknown tiny model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    if size not in SIZES:
        raise UserError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    cfg_cls, _, sizes = _SPECS[name]
    kwargs = dict(sizes[size])
    kwargs.update(overrides)
    return getattr(transformers, cfg_cls)(**kwargs)


def tiny_model(name: str, size: str = "tiny", seed: int | None = 0, **overrides: Any):
    """A randomly initialised `transformers` model ``name`` at ``size`` (eval mode, float32).

    ``seed`` makes the initialisation reproducible (``None`` leaves the global RNG alone).
    """
    import torch
    import transformers

    config = tiny_config(name, size, **overrides)
    model_cls = getattr(transformers, _SPECS[name][1])
    if seed is None:
        model = model_cls(config)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = model_cls(config)
    return model.eval()


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    value = cfg.get(key) if isinstance(cfg, dict) else getattr(cfg, key, None)
    return default if value is None else value


def tiny_llama(cfg: Any, seed: int = 0, **overrides: Any):
    """A random-init llama sized by a package's config section ``cfg`` (a mapping or attribute object):
    ``hidden_size``, ``num_layers``, ``num_heads``, ``intermediate_size``, ``vocab_size``; optional
    ``num_kv_heads`` (default ``num_heads``), ``max_position_embeddings`` (default max(256, ``seq_len``)),
    ``rope_theta``, ``initializer_range``. ``overrides`` are `transformers.LlamaConfig` fields."""
    heads = int(_get(cfg, "num_heads"))
    kw: dict[str, Any] = dict(
        hidden_size=int(_get(cfg, "hidden_size")),
        num_hidden_layers=int(_get(cfg, "num_layers")),
        num_attention_heads=heads,
        num_key_value_heads=int(_get(cfg, "num_kv_heads", heads)),
        intermediate_size=int(_get(cfg, "intermediate_size")),
        vocab_size=int(_get(cfg, "vocab_size")),
        max_position_embeddings=int(
            _get(cfg, "max_position_embeddings", None) or max(256, int(_get(cfg, "seq_len", 0)))
        ),
    )
    for key in ("rope_theta", "initializer_range"):
        if _get(cfg, key) is not None:
            kw[key] = float(_get(cfg, key))
    return tiny_model("llama", "small", seed=seed, **{**kw, **overrides})


def _conv1d_class() -> type | None:
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - very old/new transformers
        return None
    return Conv1D


def weight_kind(module: Any) -> str | None:
    """``"linear"`` for ``nn.Linear``, ``"conv1d"`` for GPT-2's ``Conv1D`` (weight stored [in, out]), else None."""
    from torch import nn

    if isinstance(module, nn.Linear):
        return "linear"
    conv1d = _conv1d_class()
    if conv1d is not None and isinstance(module, conv1d):
        return "conv1d"
    return None


def linear_targets(model: Any, skip: Any, within: Any = None, prefix: str = ""):
    """``(targets, skipped)`` of the weight layers a compression method rewrites: ``(name, module, kind)``
    for every ``nn.Linear`` / ``Conv1D`` of ``within`` (default the whole ``model``; names get ``prefix.``),
    except those ``skip(name)`` refuses and those whose weight is tied to an embedding of ``model``
    (``skipped`` lists them with the reason)."""
    from torch import nn

    embedding_ptrs = {
        m.weight.data_ptr() for m in model.modules() if isinstance(m, nn.Embedding) and m.weight is not None
    }
    targets, skipped = [], []
    for sub, module in (model if within is None else within).named_modules():
        kind = weight_kind(module)
        if kind is None:
            continue
        name = f"{prefix}.{sub}" if prefix else sub
        if skip(name):
            skipped.append({"name": name, "reason": "matches skip"})
        elif module.weight.data_ptr() in embedding_ptrs:
            skipped.append({"name": name, "reason": "weight tied to an embedding"})
        else:
            targets.append((name, module, kind))
    return targets, skipped


#: names that resolve to a real model served offline by `iclr26_core.pretrained` (converted once into the cache)
PRETRAINED_ALIASES = ("smollm2", "smollm2-135m-instruct")


def _resolve(name_or_path: str) -> str:
    if name_or_path.lower() in PRETRAINED_ALIASES:
        from .pretrained import smollm2

        return str(smollm2(log=lambda msg: print(msg, flush=True)))
    path = Path(name_or_path).expanduser()
    looks_local = name_or_path.startswith((".", "/", "~")) or path.exists()
    if looks_local:
        if not path.exists():
            raise UserError(f"model path {name_or_path!r} does not exist")
        if not (path / "config.json").is_file():
            raise UserError(f"{name_or_path!r} is not a transformers model directory (no config.json)")
        return str(path)
    return name_or_path


def _load(auto_cls_name: str, name_or_path: str, **kwargs: Any):
    import transformers

    if name_or_path.startswith("tiny-"):
        # "tiny-llama", "tiny-gpt2:small": random-init models, handy for trying a CLI without a download
        name, _, size = name_or_path[5:].partition(":")
        return tiny_model(name, size or "tiny")
    ref = _resolve(name_or_path)
    auto_cls = getattr(transformers, auto_cls_name)
    try:
        return auto_cls.from_pretrained(ref, **kwargs)
    except OSError as exc:
        raise UserError(
            f"cannot load model {name_or_path!r}: not a local model directory and the hub is not reachable "
            f"or has no such model ({str(exc).splitlines()[0]})"
        ) from exc


def load_causal_lm(name_or_path: str, **kwargs: Any):
    """A causal LM from a local directory, a hub id (needs network or the HF cache), ``smollm2`` (the real
    SmolLM2-135M-Instruct, `iclr26_core.pretrained`) or ``tiny-<name>[:size]``."""
    return _load("AutoModelForCausalLM", name_or_path, **kwargs)


def load_model(name_or_path: str, auto_class: str = "AutoModel", **kwargs: Any):
    """Any model through the given ``transformers`` auto class (``AutoModelForImageClassification`` ...)."""
    return _load(auto_class, name_or_path, **kwargs)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "vocab.txt")


def load_tokenizer(name_or_path: str, **kwargs: Any):
    """The tokenizer saved next to a model (local directory or hub id)."""
    import transformers

    ref = _resolve(name_or_path)
    local = Path(ref)
    if local.is_dir() and not any((local / f).is_file() for f in _TOKENIZER_FILES):
        # transformers 5 would return an empty tokenizer here instead of failing
        raise UserError(f"{name_or_path!r} has no tokenizer files ({', '.join(_TOKENIZER_FILES)})")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(ref, **kwargs)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"cannot load a tokenizer from {name_or_path!r} ({str(exc).splitlines()[0]})"
        ) from exc
    if len(tok) == 0:
        raise UserError(f"the tokenizer at {name_or_path!r} is empty")
    return tok


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
