"""Apply BOF4 to a `transformers` model: every ``nn.Linear`` and GPT-2 ``Conv1D`` (arXiv 2505.06653, Sec. 5).

``apply_to_model`` quantises each target weight in the [out, in] orientation (a ``Conv1D`` weight is stored
[in, out] and is transposed first), so the blocks of I weights always run along the input dimension, as for
``nn.Linear`` in bitsandbytes/QLoRA. Embeddings are never quantised, nor weights tied to an embedding, nor
modules named in ``skip`` (default ``("lm_head",)``, the QLoRA convention).

* ``mode="fake"``: the dequantised weight is written back in place (the module stays ``nn.Linear``; LoRA on
  top is numerically QLoRA);
* ``mode="packed"``: the module is replaced by :class:`BOF4Linear` (codes, scales, outliers as buffers).

``save_packed`` writes ``save_pretrained`` output plus ``bof4_quant_config.json``; ``load_packed`` rebuilds the
model from the config, swaps in ``BOF4Linear`` shells and loads the safetensors state dict.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr26_core.errors import CheckpointError, UserError
from iclr26_core.fs import write_json

from .config import BOF4Config
from .layer import BOF4Linear
from .quantizer import quantize

QUANT_CONFIG_FILE = "bof4_quant_config.json"


def _conv1d_class() -> type | None:
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - very old/new transformers
        return None
    return Conv1D


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """A skip entry matches a module name exactly, as a dotted component/suffix/prefix, or as an fnmatch glob."""
    parts = name.split(".")
    return any(
        name == p
        or p in parts
        or name.endswith("." + p)
        or name.startswith(p + ".")
        or fnmatch.fnmatchcase(name, p)
        for p in patterns
    )


@dataclass
class LayerReport:
    name: str
    kind: str  # "linear" or "conv1d"
    shape: tuple[int, int]  # [out, in]
    numel: int
    mse: float
    mae: float
    outlier_fraction: float
    nbytes: int  # quantised storage: codes + scales + outliers
    original_nbytes: int

    @property
    def rmse(self) -> float:
        return self.mse**0.5


@dataclass
class QuantReport:
    """Per-layer quantisation errors and sizes, with totals (weighted by the number of weights)."""

    config: dict[str, Any]
    layers: list[LayerReport] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def numel(self) -> int:
        return sum(layer.numel for layer in self.layers)

    def _mean(self, attr: str) -> float:
        n = self.numel
        return sum(getattr(layer, attr) * layer.numel for layer in self.layers) / n if n else 0.0

    @property
    def mse(self) -> float:
        return self._mean("mse")

    @property
    def mae(self) -> float:
        return self._mean("mae")

    @property
    def outlier_fraction(self) -> float:
        return self._mean("outlier_fraction")

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)

    @property
    def original_nbytes(self) -> int:
        return sum(layer.original_nbytes for layer in self.layers)

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.nbytes / self.numel if self.numel else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "totals": {
                "n_layers": len(self.layers),
                "numel": self.numel,
                "mse": self.mse,
                "rmse": self.mse**0.5,
                "mae": self.mae,
                "outlier_fraction": self.outlier_fraction,
                "nbytes": self.nbytes,
                "original_nbytes": self.original_nbytes,
                "bits_per_weight": self.bits_per_weight,
            },
            "layers": [
                {**asdict(layer), "shape": list(layer.shape), "rmse": layer.rmse} for layer in self.layers
            ],
            "skipped": list(self.skipped),
        }


def find_targets(model: nn.Module, skip: tuple[str, ...] = ("lm_head",)):
    """``(targets, skipped)``: targets are ``(name, module, kind)`` for nn.Linear / Conv1D modules."""
    conv1d = _conv1d_class()
    embedding_ptrs = {
        m.weight.data_ptr() for m in model.modules() if isinstance(m, nn.Embedding) and m.weight is not None
    }
    targets, skipped = [], []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            kind = "linear"
        elif conv1d is not None and isinstance(module, conv1d):
            kind = "conv1d"
        else:
            continue
        if _matches(name, skip):
            skipped.append({"name": name, "reason": "matches skip"})
        elif module.weight.data_ptr() in embedding_ptrs:
            skipped.append({"name": name, "reason": "weight tied to an embedding"})
        else:
            targets.append((name, module, kind))
    return targets, skipped


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


@torch.no_grad()
def apply_to_model(
    model: nn.Module,
    codebook: str = "bof4s-mse",
    block_size: int = 64,
    opq_q: float | None = 0.95,
    mode: str = "fake",
    skip: tuple[str, ...] = ("lm_head",),
    scale_dtype: str = "auto",
) -> QuantReport:
    """Quantise every ``nn.Linear`` / GPT-2 ``Conv1D`` of ``model`` in place → :class:`QuantReport`.

    Weights are quantised as [out, in] (``Conv1D``: transposed), blocks along the input dimension.
    """
    cfg = BOF4Config(
        codebook=codebook, block_size=block_size, opq_q=opq_q, mode=mode, skip=skip, scale_dtype=scale_dtype
    )
    targets, skipped = find_targets(model, cfg.skip)
    if not targets:
        raise UserError(
            f"no nn.Linear or Conv1D layer to quantise in {type(model).__name__} (skip={cfg.skip})"
        )
    report = QuantReport(config=cfg.to_dict(), skipped=skipped)
    modules: dict[str, dict[str, Any]] = {}
    for name, module, kind in targets:
        weight = module.weight.detach()
        w_oi = weight.t() if kind == "conv1d" else weight  # [out, in]
        q = quantize(w_oi, cfg.codebook, cfg.block_size, cfg.opq_q, scale_dtype=cfg.scale_dtype)
        deq = q.dequantize()
        diff = deq.double() - w_oi.double()
        report.layers.append(
            LayerReport(
                name=name,
                kind=kind,
                shape=(int(w_oi.shape[0]), int(w_oi.shape[1])),
                numel=w_oi.numel(),
                mse=float(diff.square().mean()),
                mae=float(diff.abs().mean()),
                outlier_fraction=q.outlier_fraction,
                nbytes=q.nbytes,
                original_nbytes=weight.numel() * weight.element_size(),
            )
        )
        if cfg.mode == "fake":
            module.weight.data.copy_(deq.t() if kind == "conv1d" else deq)
        else:
            layer = BOF4Linear.from_quantized(q, bias=module.bias, conv1d_layout=kind == "conv1d")
            layer.train(module.training)
            _set_submodule(model, name, layer)
            modules[name] = {
                "in_features": layer.in_features,
                "out_features": layer.out_features,
                "bias": layer.bias is not None,
                "block_size": layer.block_size,
                "signed": layer.signed,
                "weight_dtype": str(layer.weight_dtype).removeprefix("torch."),
                "conv1d_layout": layer.conv1d_layout,
            }
    model.bof4_quant_config = {
        "quant_method": "bof4",
        "format": 1,
        "config": cfg.to_dict(),
        "modules": modules,
    }
    return report


def save_packed(model: nn.Module, out_dir: str | Path) -> Path:
    """``model.save_pretrained(out_dir)`` (safetensors) + ``bof4_quant_config.json``; returns the directory."""
    quant_config = getattr(model, "bof4_quant_config", None)
    if quant_config is None:
        raise UserError("model was not quantised with iclr26_bof4.apply_to_model; nothing to save as BOF4")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    write_json(out / QUANT_CONFIG_FILE, quant_config)
    return out


def _load_safetensors(model_dir: Path) -> dict[str, torch.Tensor]:
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
            state.update(load_file(str(f)))
        except Exception as exc:  # safetensors raises its own error types
            raise CheckpointError(f"cannot read {f}: {exc}") from exc
    return state


def load_packed(model_dir: str | Path) -> nn.Module:
    """Rebuild a model saved by :func:`save_packed` (``BOF4Linear`` modules included), in eval mode.

    The model class comes from ``config.architectures[0]``; it is first built with random weights (full size
    in memory), then the quantised layers are swapped in and the safetensors state dict is loaded strictly.
    """
    import transformers

    path = Path(model_dir)
    qfile = path / QUANT_CONFIG_FILE
    if not path.is_dir():
        raise UserError(f"model directory {str(model_dir)!r} does not exist")
    if not qfile.is_file():
        raise CheckpointError(f"{model_dir} has no {QUANT_CONFIG_FILE}: not a packed BOF4 model")
    try:
        quant_config = json.loads(qfile.read_text(encoding="utf-8"))
        modules = quant_config["modules"]
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"corrupt {qfile}: {exc}") from exc
    config = transformers.AutoConfig.from_pretrained(str(path))
    arch = (getattr(config, "architectures", None) or [None])[0]
    model_cls = getattr(transformers, arch, None) if arch else None
    if model_cls is None:
        raise CheckpointError(f"{path / 'config.json'} names no known transformers architecture ({arch!r})")
    model = model_cls(config)
    for name, spec in modules.items():
        shell = BOF4Linear(
            spec["in_features"],
            spec["out_features"],
            bias=spec["bias"],
            block_size=spec["block_size"],
            signed=spec["signed"],
            weight_dtype=getattr(torch, spec.get("weight_dtype", "float32")),
            conv1d_layout=spec.get("conv1d_layout", False),
        )
        _set_submodule(model, name, shell)
    state = _load_safetensors(path)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise CheckpointError(
            f"{path}: state dict does not fit the model: {str(exc).splitlines()[0]}"
        ) from exc
    model.tie_weights()
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded_ids = {id(params[k]) for k in state if k in params}
    missing = [k for k in missing if not (k in params and id(params[k]) in loaded_ids)]
    if missing or unexpected:
        raise CheckpointError(f"{path}: missing keys {missing[:5]}, unexpected keys {list(unexpected)[:5]}")
    model.bof4_quant_config = quant_config
    return model.eval()
