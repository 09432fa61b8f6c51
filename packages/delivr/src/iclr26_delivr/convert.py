"""Load the official DeLiVR weights (Shuning0312/ICLR-DeLiVR ``LieTransformerNet``) into `DeLiVR`.

Checkpoint format of the official ``train_video5.py``: a ``last.pth`` dict ``{"model": <DDP state dict, keys
prefixed "module.">, "model_ema": <EMA state dict, no prefix; only with --use_ema 1, the default>, "optimizer",
"scheduler", "scaler", "epoch", "global_step", "args": vars(args)}``. Its ``test_video.py`` reads ``"model"`` (or a
bare state dict) and strips ``"module."``. We also accept ``{"state_dict"}``, ``{"ema"}``, ``{"params_ema"}``,
``{"params"}`` containers, ``torch.compile``'s ``"_orig_mod."`` prefix, and ``.safetensors`` files.

Names: our modules were named after the official ones, so the map is the identity on every parameter and buffer
(``embed.stem/proj``, ``so3_head.pre_process/net`` with BatchNorm's running stats, ``tau_raw``,
``blocks.i.{norm1, attn.qkv, attn.proj, attn.nonlinear_bias.mlp, norm2, gdfn.*, gamma1, gamma2}``,
``refinement.k.{body, ca}``, ``depatch.{conv, smooth}``, ``res_scale``). The official ``rel_bias`` and
``PixelShuffle`` hold no tensors. Two official keys may be absent and are filled: ``tau_raw`` (``learnable_tau=False``:
a fixed τ, taken as ``config.tau_init``) and BatchNorm's ``num_batches_tracked`` (0; unused in evaluation).

Caveat: the official scripts build ``LieTransformerNet(in_ch=3*T)``, so their forward sees T = 1 "frame" of 3T
channels (stem conv 3T → C, head conv C → 3T·p²): that is a different network from the per-frame one the paper and
this package describe (shared 3-channel stem, Lie bias over T frames), and its weights cannot be loaded here; the
converter says so. Checkpoints of ``LieTransformerNet(in_ch=3)`` (fed [B, 3T, H, W]) load exactly; set
``mask_after_mlp=False`` to reproduce the official forward pass (band mask written before the per-head MLP).
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from .config import DeLiVRConfig
from .model import DeLiVR

MODEL_KEYS = ("model", "state_dict", "params", "net", "network")
EMA_KEYS = ("model_ema", "params_ema", "ema", "ema_state_dict")
PREFIXES = ("module.", "_orig_mod.")
OFFICIAL_TO_OURS: dict[str, str] = {}  # every official name equals ours (see the module docstring)
OPTIONAL = {"tau_raw"}  # absent with the official learnable_tau=False


def _names(keys, limit: int = 5) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def _is_state(obj) -> bool:
    return (
        isinstance(obj, Mapping) and len(obj) > 0 and all(isinstance(v, torch.Tensor) for v in obj.values())
    )


def read_checkpoint(path: str | Path) -> dict:
    """A ``.pth``/``.pt`` file via ``torch.load(weights_only=True)`` (never arbitrary pickles) or ``.safetensors``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint not found: {path}")
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path), device="cpu")
        except (SafetensorError, OSError) as err:
            raise ValueError(f"cannot read {path} as safetensors (corrupt or truncated?): {err}") from err
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(err))
        if found is None:  # not a pickle of tensors at all (garbage, a truncated file, another format)
            raise ValueError(
                f"cannot read {path} as a PyTorch checkpoint (corrupt or another format)"
            ) from err
        raise ValueError(
            f"refusing to unpickle {path}: it holds objects other than tensors and plain containers "
            f"({found.group(1)}); torch.load(weights_only=True) only - re-save its state dict"
        ) from err
    except (RuntimeError, EOFError, OSError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(
            f"cannot read {path} as a PyTorch checkpoint (corrupt or truncated?): {first}"
        ) from err


def unwrap_state_dict(obj, prefer_ema: bool = True) -> dict[str, torch.Tensor]:
    """The tensor dict inside a checkpoint container, EMA weights first when ``prefer_ema``."""
    order = EMA_KEYS + MODEL_KEYS if prefer_ema else MODEL_KEYS + EMA_KEYS
    for _ in range(4):
        if _is_state(obj):
            return dict(obj)
        if not isinstance(obj, Mapping):
            raise ValueError(f"expected a state dict or a checkpoint dict, got {type(obj).__name__}")
        inner = next((obj[k] for k in order if isinstance(obj.get(k), Mapping) and obj[k]), None)
        if inner is None:
            raise ValueError(
                f"no state dict in the checkpoint: top-level keys {_names(map(str, obj))}; expected tensors or "
                f"one of {', '.join(order)}"
            )
        obj = inner
    raise ValueError("checkpoint containers nested too deeply")


def strip_prefixes(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop leading ``module.`` (DDP/DataParallel) and ``_orig_mod.`` (torch.compile) from every key."""
    out = {}
    for key, value in state.items():
        while key.startswith(PREFIXES):
            key = key.split(".", 1)[1]
        out[key] = value
    return out


def infer_config(state: Mapping[str, torch.Tensor], **overrides) -> DeLiVRConfig:
    """The shape fields (C, depth, heads, p, r, num_cab, MLP widths) read off an official-named state dict;
    the rest (θ_max, rotation, time weight, ...) are the official config's defaults unless overridden."""
    try:
        c = state["embed.proj.weight"].shape[0]
        hidden = state["blocks.0.gdfn.project_out.weight"].shape[1]
        ratio = hidden / c if int(c * (hidden / c)) == hidden else (hidden + 0.5) / c
        found = {
            "embed_dim": c,
            "patch": state["embed.proj.weight"].shape[-1],
            "depth": len({k.split(".")[1] for k in state if k.startswith("blocks.")}),
            "heads": state["blocks.0.attn.nonlinear_bias.mlp.2.weight"].shape[0],
            "bias_hidden": state["blocks.0.attn.nonlinear_bias.mlp.0.weight"].shape[0],
            "head_hidden": state["so3_head.net.2.weight"].shape[0],
            "ffn_ratio": ratio,
            "num_cab": len({k.split(".")[1] for k in state if k.startswith("refinement.")}),
        }
    except KeyError as err:
        raise ValueError(f"not a DeLiVR (LieTransformerNet) state dict: no {err.args[0]!r}") from err
    return DeLiVRConfig(**{**found, **overrides})


def _reference(config: DeLiVRConfig) -> dict[str, torch.Tensor]:
    """Our model's state dict for ``config`` (values only used for shapes/dtypes and the filled defaults)."""
    torch_state = torch.random.get_rng_state()
    try:
        return DeLiVR(config).state_dict()
    finally:
        torch.random.set_rng_state(torch_state)


def convert_official_state_dict(
    state: Mapping[str, torch.Tensor] | str | Path,
    config: DeLiVRConfig | None = None,
    *,
    prefer_ema: bool = True,
) -> dict[str, torch.Tensor]:
    """Official weights (a file, a checkpoint dict or a state dict) -> a state dict for ``DeLiVR(config)``.

    Raises ValueError naming up to 5 keys for unknown or missing keys and for shape mismatches.
    ``config=None`` infers the shape fields from the weights (`infer_config`).
    """
    raw = read_checkpoint(state) if isinstance(state, str | Path) else state
    official = strip_prefixes(unwrap_state_dict(raw, prefer_ema))
    renamed = {OFFICIAL_TO_OURS.get(k, k): v for k, v in official.items()}
    if config is None:
        config = infer_config(renamed)
    stem = renamed.get("embed.stem.0.weight")
    if stem is not None and stem.ndim == 4 and stem.shape[1] != 3:
        raise ValueError(
            f"embed.stem.0.weight takes {stem.shape[1]} input channels, not 3: this checkpoint comes from "
            f"LieTransformerNet(in_ch={stem.shape[1]}) (the official scripts' in_ch=3*T), which treats the stacked "
            "frames as one frame; DeLiVR shares a 3-channel stem across frames and cannot load it"
        )
    ref = _reference(config)
    unknown = set(renamed) - set(ref)
    if unknown:
        raise ValueError(f"unknown keys in the official state dict ({len(unknown)}): {_names(unknown)}")
    out = {}
    for key, like in ref.items():
        if key in renamed:
            out[key] = renamed[key]
        elif key in OPTIONAL or key.endswith("num_batches_tracked"):
            out[key] = like.clone()  # fixed τ = config.tau_init; BatchNorm counter 0
            if key.endswith("num_batches_tracked"):
                out[key].zero_()
    missing = set(ref) - set(out)
    if missing:
        raise ValueError(f"missing keys in the official state dict ({len(missing)}): {_names(missing)}")
    bad = [k for k in ref if tuple(out[k].shape) != tuple(ref[k].shape)]
    if bad:
        detail = ", ".join(f"{k} {tuple(out[k].shape)} vs ours {tuple(ref[k].shape)}" for k in bad[:5])
        raise ValueError(f"shape mismatch for {len(bad)} tensors (check the config): {detail}")
    return {k: v.to(ref[k].dtype) if v.is_floating_point() else v for k, v in out.items()}


def load_official(
    path: str | Path | Mapping[str, torch.Tensor],
    config: DeLiVRConfig | None = None,
    *,
    prefer_ema: bool = True,
) -> DeLiVR:
    """A `DeLiVR` in eval mode holding the official weights (see `convert_official_state_dict`)."""
    raw = read_checkpoint(path) if isinstance(path, str | Path) else path
    if config is None:
        config = infer_config(strip_prefixes(unwrap_state_dict(raw, prefer_ema)))
    state = convert_official_state_dict(raw, config, prefer_ema=prefer_ema)
    model = DeLiVR(config)
    model.load_state_dict(state, strict=True)
    return model.eval()
