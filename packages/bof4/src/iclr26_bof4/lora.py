"""LoRA (``peft``) on top of a packed BOF4 model: QLoRA with BOF4 codes instead of NF4.

``peft`` wraps the layer types it knows (``nn.Linear``, bitsandbytes ``Linear4bit`` ...); :class:`BOF4Linear`
is registered through peft's custom-module mapping (``LoraConfig._register_custom_module``), so
``get_peft_model(model, lora_config(...))`` puts a trainable low-rank update beside every targeted
``BOF4Linear``:

    y = BOF4Linear(x) + (α / r) · B A dropout(x),

the frozen 4-bit weight dequantised in ``forward`` as always, A (r × in) and B (out × r) trained in float32
(or the adapter's dtype). A fake-quantised model needs none of this: its layers are plain ``nn.Linear``.

Merging (``merge_and_unload``) would have to re-quantise W + ΔW; it is refused with one clear line —
save the adapter (``model.save_pretrained``) and load it again with :func:`load_lora`.
"""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig, PeftModel
from peft.tuners.lora.layer import LoraLayer
from torch import nn

from iclr26_core.errors import UserError

from .layer import BOF4Linear


class LoraBOF4Linear(nn.Module, LoraLayer):
    """A LoRA adapter around a :class:`BOF4Linear` base layer (peft's conventions for custom LoRA layers)."""

    def __init__(
        self,
        base_layer: nn.Module,
        adapter_name: str,
        config: LoraConfig,
        r: int = 0,
        lora_alpha: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        LoraLayer.__init__(self, base_layer)
        self.fan_in_fan_out = False
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, r, lora_alpha=lora_alpha, config=config)

    def _get_in_out_features(self, module: nn.Module) -> tuple[int, int]:
        return module.in_features, module.out_features

    def _get_base_layer_device_and_dtype(self, base_layer: nn.Module):
        # no float weight to read: the adapter goes to the codes' device and keeps its own dtype
        return base_layer.codes.device, None

    def resolve_lora_variant(self, *, config: LoraConfig, **kwargs: Any):
        if getattr(config, "use_dora", False):
            raise UserError("DoRA is not supported on BOF4Linear (it needs the full weight); use plain LoRA")
        return None

    def get_delta_weight(self, adapter: str) -> torch.Tensor:
        return (self.lora_B[adapter].weight @ self.lora_A[adapter].weight) * self.scaling[adapter]

    def merge(self, safe_merge: bool = False, adapter_names: list[str] | None = None) -> None:
        raise UserError(
            "merging LoRA into a packed BOF4 layer would re-quantise the weight; keep the adapter separate "
            "(save_pretrained / iclr26_bof4.load_lora) or merge into a fake-quantised model"
        )

    def unmerge(self) -> None:  # nothing is ever merged
        return None

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._check_forward_args(x, *args, **kwargs)
        kwargs.pop("adapter_names", None)
        result = self.base_layer(x, *args, **kwargs)
        if self.disable_adapters:
            return result
        for active in self.active_adapters:
            if active not in self.lora_A:
                continue
            lora_a, lora_b = self.lora_A[active], self.lora_B[active]
            h = self._cast_input_dtype(x, lora_a.weight.dtype)
            update = lora_b(lora_a(self.lora_dropout[active](h))) * self.scaling[active]
            result = result + update.to(result.dtype)
        return result

    def __repr__(self) -> str:
        return "lora." + super().__repr__()


def _register(config: LoraConfig) -> LoraConfig:
    config._register_custom_module({BOF4Linear: LoraBOF4Linear})
    return config


def lora_config(**kwargs: Any) -> LoraConfig:
    """A ``peft.LoraConfig`` (same keyword arguments) that also knows :class:`BOF4Linear` layers.

    >>> model = iclr26_bof4.from_pretrained("./llama-bof4")            # packed BOF4 checkpoint
    >>> model = peft.get_peft_model(model, iclr26_bof4.lora_config(r=8, target_modules=["q_proj", "v_proj"]))
    """
    kwargs.setdefault("task_type", "CAUSAL_LM")
    return _register(LoraConfig(**kwargs))


def load_lora(model: nn.Module, adapter_dir: str, is_trainable: bool = False) -> PeftModel:
    """Load a LoRA adapter saved from a (packed) BOF4 model onto ``model`` → ``PeftModel``."""
    try:
        config = LoraConfig.from_pretrained(str(adapter_dir))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read a LoRA adapter config in {str(adapter_dir)!r} ({exc})") from None
    return PeftModel.from_pretrained(
        model, str(adapter_dir), config=_register(config), is_trainable=is_trainable
    )
