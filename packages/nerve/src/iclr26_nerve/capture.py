"""Capture of PreAct / PostAct (and the residual stream) with forward hooks, and the token rows kept.

* `batches` turns ``analyze``'s inputs (a [B, S] id tensor, a dict of model inputs, or an iterable of either)
  into dicts of model inputs, with ``attention_mask`` merged in whichever form the inputs take.
* `Capture` hooks the selected layers: PreAct is the *output* of the registry's ``pre`` module, PostAct the
  *input* of its ``post`` module, the residual stream the *output* of the block (x + FFN(x)).
* `row_index` picks the token rows kept: unmasked positions, then a ``sample_ratio`` subsample; the same
  rows serve every capture point and every layer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from .errors import NerVEError

_SPLIT = {"first_half": 0, "second_half": 1}


class StopForward(Exception):
    """Raised by the last hook a pass needs, so that the rest of the forward pass is skipped."""


def _with_mask(batch: dict[str, Any], mask: Any) -> dict[str, Any]:
    if mask is None:
        return batch
    have = batch.get("attention_mask")
    if have is not None and not (
        isinstance(have, torch.Tensor) and have.shape == mask.shape and torch.equal(have.cpu(), mask.cpu())
    ):
        raise NerVEError("attention_mask is given twice (in the inputs dict and as an argument) and differs")
    return {**batch, "attention_mask": mask}


def batches(inputs: Any, attention_mask: Any = None) -> Iterator[dict[str, Any]]:
    """Dicts of model inputs, one per batch.

    ``attention_mask``: with a tensor or dict input, a [B, S] mask (merged into the dict; one that differs
    from a mask already in the dict is refused); with an iterable of batches, an iterable of masks, one per
    batch (a dict batch may also carry its own).
    """
    if isinstance(inputs, torch.Tensor):
        if inputs.dim() != 2:
            raise NerVEError(f"inputs: expected token ids [B, S], got shape {list(inputs.shape)}")
        if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):
            raise NerVEError("attention_mask: expected a [B, S] tensor for a [B, S] tensor of ids")
        yield _with_mask({"input_ids": inputs}, attention_mask)
    elif isinstance(inputs, Mapping):
        if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):
            raise NerVEError("attention_mask: expected a [B, S] tensor for a dict of inputs")
        yield _with_mask(dict(inputs), attention_mask)
    elif isinstance(inputs, Iterable) and not isinstance(inputs, str | bytes):
        if attention_mask is None:
            for item in inputs:
                yield from batches(item, None)
            return
        if isinstance(attention_mask, torch.Tensor):
            raise NerVEError(
                "attention_mask: with an iterable of batches pass one mask per batch (a list of [B, S] "
                "tensors) or put 'attention_mask' into each batch dict"
            )
        masks = iter(attention_mask)
        for k, item in enumerate(inputs):
            mask = next(masks, None)
            if mask is None:
                raise NerVEError(f"attention_mask: fewer masks than batches (no mask for batch {k})")
            yield from batches(item, mask)
        if next(masks, None) is not None:
            raise NerVEError("attention_mask: more masks than batches")
    else:
        raise NerVEError(
            f"inputs: expected a [B, S] tensor, a dict or an iterable of batches, got {type(inputs).__name__}"
        )


def reiterable(inputs: Any, attention_mask: Any) -> tuple[Any, Any]:
    """Inputs (and masks) that can be iterated more than once: a one-shot iterator is kept as a list."""
    if isinstance(inputs, Iterator):
        inputs = list(inputs)
    if attention_mask is not None and isinstance(attention_mask, Iterator):
        attention_mask = list(attention_mask)
    return inputs, attention_mask


def first(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple | list) else output


class Capture:
    """Forward hooks that stash PreAct / PostAct (/ residual) of the selected layers for the current batch.

    ``stop_after``: the layer whose last capture point raises `StopForward` (the rest of the forward pass is
    not needed by this pass); None runs the whole forward pass.
    """

    def __init__(
        self,
        modules: list,
        layers: list[int],
        split: str | None,
        residual: bool = False,
        stop_after: int | None = None,
    ) -> None:
        self.pre: dict[int, torch.Tensor] = {}
        self.post: dict[int, torch.Tensor] = {}
        self.res: dict[int, torch.Tensor] = {}
        self.handles = []
        for i in layers:
            pre_mod, post_mod, block = modules[i]
            stop = stop_after == i
            self.handles.append(pre_mod.register_forward_hook(self._pre_hook(i, split)))
            self.handles.append(post_mod.register_forward_pre_hook(self._post_hook(i, stop and not residual)))
            if residual:
                self.handles.append(block.register_forward_hook(self._res_hook(i, stop)))

    def _pre_hook(self, i: int, split: str | None):
        def hook(module, args, output):
            out = first(output)
            if split is not None:
                out = out.chunk(2, dim=-1)[_SPLIT[split]]
            self.pre[i] = out.detach()

        return hook

    def _post_hook(self, i: int, stop: bool):
        def hook(module, args):
            self.post[i] = args[0].detach()
            if stop:
                raise StopForward

        return hook

    def _res_hook(self, i: int, stop: bool):
        def hook(module, args, output):
            self.res[i] = first(output).detach()
            if stop:
                raise StopForward

        return hook

    def clear(self) -> None:
        self.pre.clear()
        self.post.clear()
        self.res.clear()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()


def row_index(acts: torch.Tensor, mask: Any, ratio: float, gen: torch.Generator) -> torch.Tensor:
    """Indices of the token rows kept from ``acts`` [..., D] flattened: unmasked, then subsampled."""
    n_all = acts.reshape(-1, acts.shape[-1]).shape[0]
    if isinstance(mask, torch.Tensor):
        if mask.numel() != n_all:
            raise NerVEError(f"attention_mask has {mask.numel()} entries but the batch has {n_all} positions")
        rows = torch.nonzero(mask.reshape(-1).cpu() > 0).flatten()
    else:
        rows = torch.arange(n_all)
    if ratio < 1.0 and rows.numel():
        k = max(1, math.ceil(ratio * rows.numel()))
        rows = rows[torch.randperm(rows.numel(), generator=gen)[:k]].sort().values
    return rows


def has_offload_hooks(model) -> bool:
    """True when accelerate's device hooks sit on the model (then a forward pass is never cut short)."""
    return any(hasattr(m, "_hf_hook") for m in model.modules())
