"""BOF4 as a ``transformers`` quantization method: ``AutoModelForCausalLM.from_pretrained(packed_dir)`` builds
``BOF4Linear`` layers, as it does for bitsandbytes or hqq checkpoints.

A packed checkpoint's ``config.json`` carries ``quantization_config = {"quant_method": "bof4", "loader":
"iclr26_bof4.from_pretrained", "format": 1, "config": BOF4Config, "modules": {name: layer spec}}``. Importing
this module registers :class:`BOF4QuantizationConfig` and :class:`BOF4HfQuantizer` under ``"bof4"`` with
``transformers.quantizers.auto`` (:func:`iclr26_bof4.from_pretrained` and :func:`iclr26_bof4.save_pretrained`
import it for you)::

    import iclr26_bof4.hf_quantizer  # noqa: F401  (registers "bof4")
    model = transformers.AutoModelForCausalLM.from_pretrained("./llama-bof4")

Without the registration, ``transformers`` cannot know the method: it logs "Unknown quantization type, got
bof4" and would build plain ``nn.Linear`` layers with random weights. To make that load fail instead of being
silently wrong, the checkpoint stores an empty ``<layer>.weight`` next to each packed layer's buffers (0 bytes):
a plain load meets a size mismatch for every quantised weight and raises; the BOF4 loaders ignore those keys.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from transformers.quantizers.auto import (
    AUTO_QUANTIZATION_CONFIG_MAPPING,
    AUTO_QUANTIZER_MAPPING,
    register_quantization_config,
    register_quantizer,
)
from transformers.quantizers.base import HfQuantizer
from transformers.utils.quantization_config import QuantizationConfigMixin

from iclr26_core.errors import CheckpointError

from .layer import BOF4Linear
from .model import _set_submodule

QUANT_METHOD = "bof4"
LOADER = "iclr26_bof4.from_pretrained"
SENTINEL = "weight"  # the empty tensor a packed layer leaves under its float weight's name


def shell_for(spec: dict[str, Any], device: str | torch.device = "meta") -> BOF4Linear:
    """An empty ``BOF4Linear`` of the shape a ``modules`` entry describes (buffers to be loaded into)."""
    return BOF4Linear(
        spec["in_features"],
        spec["out_features"],
        bias=spec["bias"],
        block_size=spec["block_size"],
        signed=spec["signed"],
        n_outliers=int(spec.get("n_outliers", 0)),
        scale_dtype=getattr(torch, spec.get("scale_dtype", "float16")),
        weight_dtype=getattr(torch, spec.get("weight_dtype", "float32")),
        conv1d_layout=spec.get("conv1d_layout", False),
        device=device,
    )


def sentinel_keys(modules: dict[str, Any]) -> list[str]:
    """The state-dict keys of the empty placeholders, one per packed layer."""
    return [f"{name}.{SENTINEL}" for name in modules]


class BOF4QuantizationConfig(QuantizationConfigMixin):
    """``quantization_config`` of a packed BOF4 checkpoint (``quant_method="bof4"``); ``modules`` maps each
    packed layer's name to its shape spec, ``config`` is the :class:`~iclr26_bof4.BOF4Config` it was made with."""

    def __init__(
        self,
        modules: dict[str, dict[str, Any]] | None = None,
        config: dict[str, Any] | None = None,
        format: int = 1,  # the key's name in the checkpoint
        loader: str = LOADER,
        **kwargs: Any,
    ) -> None:
        self.quant_method = QUANT_METHOD
        self.format = int(format)
        self.loader = loader
        self.config = dict(config or {})
        self.modules = dict(modules or {})
        for key, value in kwargs.items():
            if key != "quant_method":
                setattr(self, key, value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "quant_method": QUANT_METHOD,
            "loader": self.loader,
            "format": self.format,
            "config": self.config,
            "modules": self.modules,
        }


class BOF4HfQuantizer(HfQuantizer):
    """Loads pre-quantised BOF4 checkpoints: puts ``BOF4Linear`` shells (on the meta device) in place of the
    packed layers before ``transformers`` assigns the stored codes, scales and outliers to them."""

    requires_calibration = True  # weights are quantised by iclr26_bof4.apply_to_model, never on load

    def validate_environment(self, *args: Any, **kwargs: Any) -> None:
        if not self.pre_quantized:
            raise CheckpointError(
                f"BOF4 quantises with iclr26_bof4.apply_to_model, not on load; {LOADER} reads a packed folder"
            )

    def _process_model_before_weight_loading(self, model, **kwargs: Any):
        modules = self.quantization_config.modules
        try:
            for name, spec in modules.items():
                _set_submodule(model, name, shell_for(spec))
        except (KeyError, AttributeError, TypeError) as exc:
            raise CheckpointError(f"corrupt BOF4 quantization_config in config.json: {exc}") from exc
        ignore = {f"^{re.escape(key)}$" for key in sentinel_keys(modules)}
        model._keys_to_ignore_on_load_unexpected = (
            set(model._keys_to_ignore_on_load_unexpected or ()) | ignore
        )
        return model

    def _process_model_after_weight_loading(self, model, **kwargs: Any):
        model.bof4_quant_config = self.quantization_config.to_dict()
        return model

    def is_serializable(self, *args: Any, **kwargs: Any) -> bool:
        return False  # save with iclr26_bof4.save_pretrained, which writes the sentinels and the config

    @property
    def is_trainable(self) -> bool:
        return True  # LoRA on top (iclr26_bof4.lora_config); the 4-bit base stays frozen


def register() -> None:
    """Register ``"bof4"`` with ``transformers`` (idempotent; done when this module is imported)."""
    if QUANT_METHOD not in AUTO_QUANTIZATION_CONFIG_MAPPING:
        register_quantization_config(QUANT_METHOD)(BOF4QuantizationConfig)
    if QUANT_METHOD not in AUTO_QUANTIZER_MAPPING:
        register_quantizer(QUANT_METHOD)(BOF4HfQuantizer)


register()
