"""GRQA as a plug-in for query-based heads: `with_grqa(model, cfg)` wraps an EoMT (QPrompt) or a Mask2Former
universal-segmentation model for training; ``.unwrap()`` returns the untouched model for inference.

The wrapper owns no parameter and registers its forward hooks only for the duration of one training forward, so
the unwrapped model has the plain model's state-dict keys, parameter count, FLOPs and outputs.

Extraction (the tensors `grqa_loss` needs, from the model's last prediction):

- EoMT: ``mask_embeds`` = output of ``mask_head`` (MLP₃ of the query tokens), ``pixel_embeds`` = output of
  ``upscale_block``; ``hidden`` space: the query and patch tokens that ``predict`` receives.
- Mask2Former: ``mask_embeds`` = output of the last decoder layer's ``mask_embedder`` call, ``pixel_embeds`` =
  ``pixel_decoder_last_hidden_state``; ``hidden`` space: the decoder's last query states and the same pixel map.

In both, ``masks_queries_logits = einsum("bqc,bchw->bqhw", mask_embeds, pixel_embeds)``, which the tests verify.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from .config import GRQAConfig
from .grqa import GRQAOutput, grqa_loss


def head_kind(model: nn.Module) -> str:
    """``"eomt"`` or ``"mask2former"``; anything else is a user mistake."""
    from iclr26_core.errors import UserError

    name = type(model).__name__
    if name == "EomtForUniversalSegmentation":
        return "eomt"
    if name == "Mask2FormerForUniversalSegmentation":
        return "mask2former"
    raise UserError(f"GRQA plugs into EoMT or Mask2Former universal-segmentation models, not {name}")


class _Capture:
    """Forward hooks that keep the last output (and input) of the modules that make the mask logits."""

    def __init__(self, model: nn.Module, kind: str) -> None:
        self.kind, self.store, self.handles = kind, {}, []
        if kind == "eomt":
            self._hook(model.mask_head, "mask_embeds", "queries")
            self._hook(model.upscale_block, "pixel_embeds", "patches")
        else:
            predictor = model.model.transformer_module.decoder.mask_predictor
            self._hook(predictor.mask_embedder, "mask_embeds", "queries")

    def _hook(self, module: nn.Module, out_key: str, in_key: str) -> None:
        def fn(_mod, args, output):
            self.store[out_key] = output
            self.store[in_key] = args[0]

        self.handles.append(module.register_forward_hook(fn))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()


def extract(model: nn.Module, pixel_values: Tensor, **kwargs: Any) -> tuple[Any, dict[str, Tensor]]:
    """Run ``model`` once and return ``(outputs, tensors)`` with ``mask_embeds`` [B,K,D], ``pixel_embeds``
    [B,D,h,w], ``queries`` [B,K,D] and ``patches`` [B,D,h₀,w₀] of the final prediction."""
    kind = head_kind(model)
    cap = _Capture(model, kind)
    try:
        kw = {"output_hidden_states": False} if kind == "eomt" else {}
        outputs = model(pixel_values=pixel_values, **kw, **kwargs)
    finally:
        cap.remove()
    t = dict(cap.store)
    if kind == "mask2former":
        t["pixel_embeds"] = outputs.pixel_decoder_last_hidden_state
        t["patches"] = t["pixel_embeds"]
    return outputs, t


class GRQAWrapper(nn.Module):
    """Training view of a query-based segmenter: ``loss = L_seg + λ·L_GRQA``; ``unwrap()`` for inference."""

    def __init__(self, model: nn.Module, cfg: GRQAConfig | None = None) -> None:
        super().__init__()
        head_kind(model)
        self.model = model
        self.cfg = cfg or GRQAConfig()
        self.last: GRQAOutput | None = None

    def forward(self, pixel_values: Tensor, mask_labels: list[Tensor], class_labels: list[Tensor]) -> Any:
        outputs, t = extract(self.model, pixel_values, mask_labels=mask_labels, class_labels=class_labels)
        hidden = self.cfg.space == "hidden"
        embeds = t["queries"] if hidden else t["mask_embeds"]
        if hidden and embeds.dim() == 3 and embeds.shape[0] != pixel_values.shape[0]:
            embeds = embeds.transpose(0, 1)  # Mask2Former's decoder states are [K, B, D]
        pixel = t["patches"] if hidden else t["pixel_embeds"]
        self.last = grqa_loss(
            embeds,
            pixel,
            outputs.masks_queries_logits,
            outputs.class_queries_logits,
            mask_labels,
            class_labels,
            self.cfg,
        )
        outputs.loss = outputs.loss + self.cfg.weight * self.last.loss
        return outputs

    def unwrap(self) -> nn.Module:
        """The plain segmentation model (no hook, no extra parameter): what is saved and deployed."""
        return self.model


def with_grqa(model: nn.Module, cfg: GRQAConfig | None = None) -> GRQAWrapper:
    """Wrap an EoMT/QPrompt or Mask2Former model so that its training loss adds λ·L_GRQA."""
    return GRQAWrapper(model, cfg)
