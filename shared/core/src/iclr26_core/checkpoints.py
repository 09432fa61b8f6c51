"""Save and load a model with its resolved config, metrics and package versions — atomically, no pickle.

Layout of a checkpoint directory::

    model.safetensors     the state dict (tied weights stored once)
    config.json           the model's transformers config (when it has one)
    run_config.json       the resolved run config (any JSON-able dict / OmegaConf)
    metrics.json          numbers the run measured
    meta.json             package versions, time, file sizes and SHA-256 of model.safetensors

`save` writes into a hidden temporary directory and renames it into place, so a crash never leaves a
half checkpoint; it refuses to overwrite a non-empty directory. `load` verifies size and hash and raises
`CheckpointError` (one clear line) for a missing, truncated or corrupt checkpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .errors import CheckpointError
from .fs import staged_dir, write_json

WEIGHTS = "model.safetensors"


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("iclr26-core", "torch", "transformers", "safetensors"):
        with contextlib.suppress(PackageNotFoundError):
            out[dist] = version(dist)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _plain(config: Any) -> Any:
    if config is None:
        return {}
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(config, DictConfig | ListConfig):
            return OmegaConf.to_container(config, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return config


def save(
    directory: str | Path,
    model: Any,
    config: Any = None,
    metrics: dict | None = None,
    extra_tensors: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint of ``model`` (an ``nn.Module`` or a state dict) to ``directory``."""
    import torch
    from safetensors.torch import save_file, save_model

    directory = Path(directory)
    with staged_dir(directory) as tmp:
        weights = tmp / WEIGHTS
        if isinstance(model, torch.nn.Module):
            save_model(model, str(weights))  # handles tied / shared tensors
            if getattr(model, "config", None) is not None and hasattr(model.config, "to_json_file"):
                model.config.to_json_file(str(tmp / "config.json"))
        else:
            save_file({k: v.detach().contiguous().cpu() for k, v in model.items()}, str(weights))
        if extra_tensors:
            save_file(
                {k: v.detach().contiguous().cpu() for k, v in extra_tensors.items()},
                str(tmp / "extra.safetensors"),
            )
        write_json(tmp / "run_config.json", _plain(config))
        write_json(tmp / "metrics.json", metrics or {})
        write_json(
            tmp / "meta.json",
            {
                "versions": _versions(),
                "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "files": {WEIGHTS: {"bytes": weights.stat().st_size, "sha256": _sha256(weights)}},
            },
        )
    return directory


@dataclass
class Checkpoint:
    path: Path
    state_dict: dict[str, Any]
    config: dict[str, Any]
    metrics: dict[str, Any]
    meta: dict[str, Any]
    model_config: dict[str, Any] | None
    extra_tensors: dict[str, Any]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(
            f"checkpoint {str(path.parent)!r} is incomplete: {path.name} is missing"
        ) from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint file {str(path)!r} is corrupt ({exc.msg})") from None


def load(directory: str | Path, model: Any = None, strict: bool = True, device: str = "cpu") -> Checkpoint:
    """Read a checkpoint; with ``model`` given, also load the weights into it (``strict`` key matching)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint at {str(directory)!r}")
    meta = _read_json(directory / "meta.json")
    weights = directory / WEIGHTS
    if not weights.is_file():
        raise CheckpointError(f"checkpoint {str(directory)!r} is incomplete: {WEIGHTS} is missing")
    expected = meta.get("files", {}).get(WEIGHTS, {})
    size = weights.stat().st_size
    if expected.get("bytes") not in (None, size):
        raise CheckpointError(
            f"checkpoint {str(directory)!r} is truncated: {WEIGHTS} has {size} bytes, "
            f"expected {expected['bytes']}"
        )
    if expected.get("sha256") not in (None, _sha256(weights)):
        raise CheckpointError(f"checkpoint {str(directory)!r} is corrupt: {WEIGHTS} fails its SHA-256 check")
    try:
        state = load_file(str(weights), device=device)
        extra_path = directory / "extra.safetensors"
        extra = load_file(str(extra_path), device=device) if extra_path.is_file() else {}
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"checkpoint {str(directory)!r} cannot be read ({exc})") from None
    if model is not None:
        from safetensors.torch import load_model

        try:
            load_model(model, str(weights), strict=strict, device=device)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise CheckpointError(f"checkpoint {str(directory)!r} does not fit the model: {first}") from None
    model_config = _read_json(directory / "config.json") if (directory / "config.json").is_file() else None
    return Checkpoint(
        directory,
        state,
        _read_json(directory / "run_config.json"),
        _read_json(directory / "metrics.json"),
        meta,
        model_config,
        extra,
    )
