"""The whole PM-KVQ pipeline: reparameterise (PI calibration), sensitivities, allocation, a cache per plan.

>>> plan = pm_kvq(model, calib_batches, budget_mb=64, max_len=32768)      # model reparameterised in place
>>> out = model.generate(ids, max_new_tokens=4096, past_key_values=plan.cache())   # or cache= (transformers >= 5.2x)

``budget_mb`` is the total KV budget of all blocks for one sequence of ``max_len`` tokens, in MiB (2^20 bytes),
not counting the sink and the full-precision window (a constant overhead).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from iclr26_core.errors import UserError

from .allocation import allocate_memory
from .arch import check_supported
from .cache import ProgressiveQuantizedCache, mem_bytes
from .quantizer import CACHE_BITS, check_bits, resolve_group_size
from .reparam import RepScales, calibrate_reparameterization
from .sensitivity import kv_sensitivity

MIB = 2**20


@dataclass
class PMKVQPlan:
    """Bits and byte budget per block, with what decided them."""

    bits: list[int]
    budgets_bytes: list[int]
    bit_choices: list[int]
    sensitivity: list[list[float]]
    max_len: int
    budget_bytes: int
    n_kv_heads: int
    head_dim: int
    group_size: int
    n_sink: int = 1
    window: int = 128
    count_scales: bool = True
    effective_len: int | None = None
    alphas: list[float] | None = None
    rep_scales: RepScales | None = field(default=None, repr=False)

    def cache(self, **overrides: Any) -> ProgressiveQuantizedCache:
        """A fresh `ProgressiveQuantizedCache` with this plan's budgets (keyword arguments override)."""
        kw = dict(n_sink=self.n_sink, window=self.window, group_size=self.group_size)
        kw.update(count_scales=self.count_scales, **overrides)
        return ProgressiveQuantizedCache(self.budgets_bytes, **kw)

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("rep_scales")
        data["budget_mb"] = self.budget_bytes / MIB
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> PMKVQPlan:
        data = json.loads(text)
        data.pop("budget_mb", None)
        return cls(**data)

    @classmethod
    def load(cls, directory: str | Path) -> PMKVQPlan:
        """A plan directory written by ``iclr26-pmkvq calibrate``: plan.json (+ rep_scales.safetensors)."""
        directory = Path(directory)
        path = directory / "plan.json"
        if not path.is_file():
            raise UserError(f"{str(directory)!r} has no plan.json (write one with `iclr26-pmkvq calibrate`)")
        try:
            plan = cls.from_json(path.read_text())
        except (json.JSONDecodeError, TypeError) as exc:
            raise UserError(f"{str(path)!r} is not a PM-KVQ plan ({exc})") from None
        rep = directory / "rep_scales.safetensors"
        if rep.is_file():
            plan.rep_scales = RepScales.load(rep)
        return plan

    def prepare(self, model: Any) -> Any:
        """Check the model fits the plan and apply the reparameterisation (in place); returns the model."""
        shape = check_supported(model)
        if shape.n_layers != len(self.bits) or shape.n_kv_heads != self.n_kv_heads:
            raise UserError(
                f"the plan is for {len(self.bits)} blocks x {self.n_kv_heads} KV heads; the model has "
                f"{shape.n_layers} x {shape.n_kv_heads}"
            )
        if self.rep_scales is not None:
            self.rep_scales.apply(model)
        return model


def pm_kvq(
    model: Any,
    calib_batches: Iterable[torch.LongTensor],
    budget_mb: float,
    max_len: int,
    *,
    bit_choices: Sequence[int] = (2, 4),
    effective_len: int | None = 8192,
    reparameterize: bool = True,
    group_size: int | None = None,
    count_scales: bool = True,
    n_sink: int = 1,
    window: int = 128,
) -> PMKVQPlan:
    """Calibrate PM-KVQ on ``model`` (reparameterised in place when ``reparameterize``) → a `PMKVQPlan`."""
    shape = check_supported(model)
    if not budget_mb > 0:
        raise UserError(f"budget_mb must be > 0, got {budget_mb}")
    if max_len <= 0:
        raise UserError(f"max_len must be > 0, got {max_len}")
    bit_choices = sorted({check_bits(b, CACHE_BITS, "bit choice") for b in bit_choices})
    g = resolve_group_size(shape.head_dim, group_size)
    batches = list(calib_batches)
    rep = None
    if reparameterize:
        rep = calibrate_reparameterization(model, batches, effective_len=effective_len, group_size=g)
        rep.apply(model)
    sens = kv_sensitivity(model, batches, bit_choices, effective_len, g)
    budget = int(budget_mb * MIB)
    dims = dict(n_kv_heads=shape.n_kv_heads, head_dim=shape.head_dim, group_size=g)
    bits = allocate_memory(sens, bit_choices, budget, max_len=max_len, count_scales=count_scales, **dims)
    budgets = [mem_bytes(b, max_len, count_scales=count_scales, **dims) for b in bits]
    return PMKVQPlan(
        bits=bits,
        budgets_bytes=budgets,
        bit_choices=bit_choices,
        sensitivity=sens.tolist(),
        max_len=int(max_len),
        budget_bytes=budget,
        n_sink=n_sink,
        window=window,
        count_scales=count_scales,
        effective_len=effective_len,
        alphas=rep.alphas if rep else None,
        rep_scales=rep,
        **dims,
    )
