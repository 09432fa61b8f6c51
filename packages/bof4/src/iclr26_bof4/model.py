"""Apply BOF4 to a `transformers` model: every ``nn.Linear`` and GPT-2 ``Conv1D`` (arXiv 2505.06653, Sec. 5).

``apply_to_model`` quantises each target weight in the [out, in] orientation (a ``Conv1D`` weight is stored
[in, out] and is transposed first), so the blocks of I weights always run along the input dimension, as for
``nn.Linear`` in bitsandbytes/QLoRA. Embeddings are never quantised, nor weights tied to an embedding, nor
modules named in ``skip`` (default ``("lm_head",)``, the QLoRA convention).

* ``mode="fake"``: the dequantised weight is written back in place (the module stays ``nn.Linear``; LoRA on
  top is numerically QLoRA);
* ``mode="packed"``: the module is replaced by :class:`BOF4Linear` (codes, scales, outliers as buffers).

Layers are quantised one at a time on the device their weight lives on (a model loaded with ``dtype`` and
``device_map`` stays where it is); in packed mode each float weight is released when its layer is replaced,
so an 8B model never needs two full copies. Saving and loading: :mod:`iclr26_bof4.checkpoint`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from iclr26_core.errors import UserError

from .config import BOF4Config
from .layer import BOF4Linear
from .quantizer import quantize


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
    from iclr26_core.models import linear_targets

    return linear_targets(model, lambda name: _matches(name, skip))


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
    plan = [(name, kind) for name, _, kind in targets]
    del targets  # hold one layer at a time: a replaced layer's float weight is freed as we go
    report = QuantReport(config=cfg.to_dict(), skipped=skipped)
    modules: dict[str, dict[str, Any]] = {}
    for name, kind in plan:
        module = model.get_submodule(name)
        if module.weight.is_meta:
            raise UserError(
                f"layer {name} is offloaded (its weight is on the meta device): quantising needs every weight in "
                "memory; load the model with a device map without disk/CPU offload"
            )
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
        del diff
        if cfg.mode == "fake":
            module.weight.data.copy_(deq.t() if kind == "conv1d" else deq)
        else:
            layer = BOF4Linear.from_quantized(q, bias=module.bias, conv1d_layout=kind == "conv1d")
            layer.train(module.training)
            hook = getattr(module, "_hf_hook", None)
            if hook is not None:  # a device-mapped model: keep accelerate's device alignment on this layer
                from accelerate.hooks import add_hook_to_module

                add_hook_to_module(layer, hook)
            _set_submodule(model, name, layer)
            modules[name] = {
                "in_features": layer.in_features,
                "out_features": layer.out_features,
                "bias": layer.bias is not None,
                "block_size": layer.block_size,
                "signed": layer.signed,
                "n_outliers": layer.outlier_idx.numel(),
                "scale_dtype": str(layer.scales.dtype).removeprefix("torch."),
                "weight_dtype": str(layer.weight_dtype).removeprefix("torch."),
                "conv1d_layout": layer.conv1d_layout,
            }
        del module, weight, w_oi, q, deq
    model.bof4_quant_config = {
        "quant_method": "bof4",
        "format": 1,
        "config": cfg.to_dict(),
        "modules": modules,
    }
    return report
