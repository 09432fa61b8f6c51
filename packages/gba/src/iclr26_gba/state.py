"""Training state on disk, so that a GBA run resumes where it stopped.

    <dir>/sae.safetensors, sae_config.json      the SAE (`TiedSAE.save`): W, a, b (the adapted biases), b_pre
    <dir>/training_state.safetensors            groups [M], targets [M], taf [K], the open window's counts /
                                                maxima, Adam's moments (opt.<param>.<key>)
    <dir>/training_state.json                   steps done, adaptation settings, window sizes, Adam's groups

`save_training_state(result, dir)` writes the last two next to a saved SAE; ``train_sae(..., resume=dir)``
reads all of it and continues (a fresh data stream, seeded by the seed and the step reached).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from .errors import GBAError

STATE_TENSORS = "training_state.safetensors"
STATE_JSON = "training_state.json"


def save_training_state(result, directory: str | Path) -> Path:
    """Write the GBA state (groups, targets, biases via the SAE, window statistics) and Adam's moments."""
    from safetensors.torch import save_file

    from iclr26_core.fs import write_json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    info: dict[str, Any] = {"steps_done": int(result.steps_done), "method": result.method}
    gba = result.adaptation
    if gba is not None:
        tensors.update({"groups": gba.groups, "targets": gba.targets, "taf": gba.taf})
        if gba._count is not None:
            tensors.update({"window_count": gba._count.cpu(), "window_max": gba._max.cpu()})
        info["adaptation"] = gba.config()
        info["window"] = {"rows": gba._rows, "steps": gba._steps, "n_updates": gba.n_updates}
    opt = result.optimizer
    if opt is not None:
        names = {id(p): n for n, p in result.sae.named_parameters()}
        groups = []
        for group in opt.param_groups:
            groups.append({k: v for k, v in group.items() if k != "params" and _jsonable(v)})
            groups[-1]["params"] = [names[id(p)] for p in group["params"]]
            for p in group["params"]:
                for key, value in opt.state.get(p, {}).items():
                    if isinstance(value, torch.Tensor):
                        tensors[f"opt.{names[id(p)]}.{key}"] = value.detach().cpu()
        info["optimizer"] = groups
    fd, tmp = tempfile.mkstemp(prefix=f".{STATE_TENSORS}.", dir=directory)
    os.close(fd)
    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, tmp)
        os.replace(tmp, directory / STATE_TENSORS)
    finally:
        Path(tmp).unlink(missing_ok=True)
    write_json(directory / STATE_JSON, info)
    return directory


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
    except TypeError:
        return False
    return True


def load_training_state(directory: str | Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(info, tensors) written by `save_training_state`; one clear error when missing or corrupt."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    if not (directory / STATE_JSON).is_file() or not (directory / STATE_TENSORS).is_file():
        raise GBAError(
            f"{str(directory)!r} has no training state to resume from ({STATE_JSON}, {STATE_TENSORS})"
        )
    try:
        info = json.loads((directory / STATE_JSON).read_text())
        tensors = load_file(str(directory / STATE_TENSORS))
    except (json.JSONDecodeError, SafetensorError, OSError) as exc:
        raise GBAError(
            f"training state at {str(directory)!r} is corrupt ({str(exc).splitlines()[0]})"
        ) from None
    return info, tensors


def restore_adaptation(gba, info: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    """Put saved groups, targets and the open window back into a `GroupBiasAdaptation`."""
    if tensors["groups"].shape != gba.groups.shape:
        raise GBAError(
            f"the saved state has {tensors['groups'].numel()} neurons, the SAE {gba.groups.numel()}"
        )
    gba.groups = tensors["groups"].long()
    gba.targets = tensors["targets"].double()
    gba.taf = tensors["taf"].double()
    window = info.get("window", {})
    gba.n_updates = int(window.get("n_updates", 0))
    if "window_count" in tensors:
        gba._count, gba._max = tensors["window_count"], tensors["window_max"]
        gba._rows, gba._steps = int(window.get("rows", 0)), int(window.get("steps", 0))


def restore_optimizer(opt, sae, info: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    """Load Adam's moments (by parameter name) into ``opt``."""
    params = dict(sae.named_parameters())
    for saved, group in zip(info.get("optimizer", []), opt.param_groups):
        group.update({k: v for k, v in saved.items() if k not in ("params", "fused", "foreach")})
    on_device = any(g.get("fused") or g.get("capturable") for g in opt.param_groups)
    for key, value in tensors.items():
        if not key.startswith("opt."):
            continue
        name, _, slot = key[4:].rpartition(".")
        if name not in params:
            raise GBAError(f"the saved optimizer state has a parameter {name!r} this SAE does not have")
        p = params[name]
        opt.state[p][slot] = value.to(p.device) if slot != "step" or on_device else value
