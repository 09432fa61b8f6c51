"""BOF4 checkpoints: a quantised model saved and loaded in one call each, as ``save_pretrained``/``from_pretrained``.

A checkpoint is a ``transformers`` model directory (``config.json``, ``model.safetensors`` or shards, the
tokenizer when given) plus ``bof4_quant_config.json``: ``{"quant_method": "bof4", "format": 1, "config":
BOF4Config, "modules": {name: BOF4Linear shape}}``. ``modules`` is empty for a fake-quantised model (plain
``nn.Linear`` holding dequantised weights), which any ``transformers`` loader reads as it is. A packed one also
carries that dict as ``quantization_config`` in ``config.json`` and an empty ``<layer>.weight`` per packed layer:
``transformers.AutoModelForCausalLM.from_pretrained`` then builds ``BOF4Linear`` layers once
:mod:`.hf_quantizer` is imported (this module imports it), and refuses the folder (size mismatch) where it is not,
instead of initialising the quantised layers at random.

:func:`load_packed` never materialises the full-precision model: it builds the architecture on the meta device
(``accelerate.init_empty_weights``), puts empty ``BOF4Linear`` shells in place of the quantised layers and
assigns the safetensors tensors to them (``load_state_dict(assign=True)``), so loading a packed 8B model needs
the packed size in memory, not 16 or 32 GB first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr26_core.errors import CheckpointError, UserError
from iclr26_core.fs import check_out_dir, staged_dir, write_json

from .hf_quantizer import LOADER, QUANT_METHOD, sentinel_keys, shell_for
from .layer import QUANT_BUFFERS
from .model import _set_submodule

QUANT_CONFIG_FILE = "bof4_quant_config.json"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | str | None:
    """``None``/``"auto"`` (the checkpoint's own dtype) or a float dtype by name or value."""
    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; choose one of auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def save_packed(model: nn.Module, out_dir: str | Path) -> Path:
    """``model.save_pretrained(out_dir)`` (safetensors) + ``bof4_quant_config.json``; returns the directory."""
    quant_config = getattr(model, "bof4_quant_config", None)
    if quant_config is None:
        raise UserError("model was not quantised with iclr26_bof4.apply_to_model; nothing to save as BOF4")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    modules = quant_config["modules"]
    state = model.state_dict()
    state.update({key: torch.zeros(0, dtype=torch.uint8) for key in sentinel_keys(modules)})
    model.save_pretrained(out, state_dict=state)
    write_json(out / QUANT_CONFIG_FILE, quant_config)
    if modules:  # packed: transformers' own from_pretrained reads it through the registered "bof4" quantizer
        config_file = out / "config.json"
        config = json.loads(config_file.read_text(encoding="utf-8"))
        config["quantization_config"] = {**quant_config, "quant_method": QUANT_METHOD, "loader": LOADER}
        write_json(config_file, config)
    return out


def save_pretrained(model: nn.Module, out_dir: str | Path, tokenizer: Any = None) -> Path:
    """Save a BOF4-quantised model (packed or fake), its quant config and ``tokenizer`` in one call.

    ``out_dir`` must be new or empty; it appears complete or not at all (built in a temporary directory and
    renamed). Read it back with :func:`from_pretrained`.
    """
    if getattr(model, "bof4_quant_config", None) is None:
        raise UserError("model was not quantised with iclr26_bof4.apply_to_model; nothing to save as BOF4")
    out = check_out_dir(out_dir)
    with staged_dir(out) as tmp:
        save_packed(model, tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return out


def _load_safetensors(model_dir: Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    single = model_dir / "model.safetensors"
    index = model_dir / "model.safetensors.index.json"
    if single.is_file():
        files = [single]
    elif index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        files = [model_dir / f for f in sorted(set(weight_map.values()))]
    else:
        raise CheckpointError(f"{model_dir} has no model.safetensors (or index)")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            state.update(load_file(str(f), device=str(device)))
        except Exception as exc:  # safetensors raises its own error types
            raise CheckpointError(f"cannot read {f}: {exc}") from exc
    return state


def _read_quant_config(path: Path) -> dict[str, Any] | None:
    qfile = path / QUANT_CONFIG_FILE
    if not qfile.is_file():
        return None
    try:
        quant_config = json.loads(qfile.read_text(encoding="utf-8"))
        if not isinstance(quant_config["modules"], dict):
            raise ValueError("'modules' is not a mapping")
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"corrupt {qfile}: {exc}") from exc
    return quant_config


def _dispatch(model: nn.Module, device_map: Any) -> nn.Module:
    """Place a loaded model: one device (``"cpu"``, ``"cuda:0"``), or ``"auto"``/a dict through accelerate."""
    if device_map is None:
        return model
    if isinstance(device_map, str) and device_map != "auto":
        return model.to(device_map)
    from accelerate import dispatch_model, infer_auto_device_map

    if device_map == "auto":
        device_map = infer_auto_device_map(model, no_split_module_classes=model._no_split_modules or [])
    devices = set(device_map.values())
    if devices <= {"cpu"} or len(devices) == 1:
        return model.to(next(iter(devices)) if devices else "cpu")
    return dispatch_model(model, device_map=device_map)


def load_packed(
    model_dir: str | Path, dtype: str | torch.dtype | None = None, device_map: Any = None
) -> nn.Module:
    """Rebuild a model saved by :func:`save_packed` / :func:`save_pretrained` (``BOF4Linear`` modules included).

    The architecture comes from ``config.architectures[0]`` and is built on the meta device; the stored tensors
    are assigned, not copied. ``dtype`` casts the unquantised tensors (norms, embeddings, biases; the 4-bit
    codes and scales keep theirs); ``device_map``: one device, ``"auto"`` or an accelerate device map.
    Returns the model in eval mode.
    """
    import transformers
    from accelerate import init_empty_weights

    path = Path(model_dir)
    if not path.is_dir():
        raise UserError(f"model directory {str(model_dir)!r} does not exist")
    quant_config = _read_quant_config(path)
    if quant_config is None:
        raise CheckpointError(f"{model_dir} has no {QUANT_CONFIG_FILE}: not a packed BOF4 model")
    modules = quant_config["modules"]
    dtype = resolve_dtype(dtype)
    config = transformers.AutoConfig.from_pretrained(str(path))
    arch = (getattr(config, "architectures", None) or [None])[0]
    model_cls = getattr(transformers, arch, None) if arch else None
    if model_cls is None:
        raise CheckpointError(f"{path / 'config.json'} names no known transformers architecture ({arch!r})")
    with init_empty_weights(include_buffers=False):  # parameters on meta; computed buffers (rotary) real
        model = model_cls(config)
    try:
        for name, spec in modules.items():
            _set_submodule(model, name, shell_for(spec))
    except (KeyError, AttributeError, TypeError) as exc:
        raise CheckpointError(f"corrupt {path / QUANT_CONFIG_FILE}: {exc}") from exc
    state = _load_safetensors(path)
    for key in sentinel_keys(modules):  # the empty placeholders that make a plain transformers load refuse
        state.pop(key, None)
    if isinstance(dtype, torch.dtype):
        quant_keys = {f"{name}.{buf}" for name in modules for buf in QUANT_BUFFERS}
        state = {
            k: v.to(dtype) if v.is_floating_point() and k not in quant_keys else v for k, v in state.items()
        }
    try:
        _, unexpected = model.load_state_dict(state, strict=False, assign=True)
    except RuntimeError as exc:
        raise CheckpointError(
            f"{path}: state dict does not fit the model: {str(exc).splitlines()[0]}"
        ) from exc
    model.tie_weights()
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left or unexpected:
        raise CheckpointError(f"{path}: missing keys {left[:5]}, unexpected keys {list(unexpected)[:5]}")
    model.bof4_quant_config = quant_config
    return _dispatch(model, device_map).eval()


def from_pretrained(
    model_dir: str | Path, dtype: str | torch.dtype | None = "auto", device_map: Any = None
) -> nn.Module:
    """Load what :func:`save_pretrained` wrote: packed checkpoints through :func:`load_packed`, fake-quantised
    (or plain) ones through ``AutoModelForCausalLM.from_pretrained``; in eval mode."""
    path = Path(model_dir)
    if not path.is_dir():
        raise UserError(f"model directory {str(model_dir)!r} does not exist")
    quant_config = _read_quant_config(path)
    if quant_config is not None and quant_config["modules"]:
        return load_packed(path, dtype=None if dtype == "auto" else dtype, device_map=device_map)
    from iclr26_core.models import load_causal_lm

    model = load_causal_lm(str(path), dtype=resolve_dtype(dtype), device_map=device_map)
    if quant_config is not None:
        model.bof4_quant_config = quant_config
    return model.eval()
