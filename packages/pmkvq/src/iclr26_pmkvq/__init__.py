"""iclr26-pmkvq: PM-KVQ, progressive mixed-precision KV cache quantisation (arXiv 2505.18610, ICLR 2026).

>>> import iclr26_pmkvq as pm
>>> plan = pm.pm_kvq(model, calib_batches, budget_mb=64, max_len=32768)   # reparameterises model in place
>>> out = model.generate(ids, max_new_tokens=4096, past_key_values=plan.cache())
>>> cache = pm.ProgressiveQuantizedCache([budget_bytes] * n_layers, window=128)   # by hand

Importing the package does not import torch: the public names below are loaded on first access
(PEP 562 module ``__getattr__``), so ``iclr26-pmkvq --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-pmkvq")

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "quantize_groups": "quantizer",
    "QuantizedGroups": "quantizer",
    "equivalent_right_shift": "quantizer",
    "naive_right_shift": "quantizer",
    "ProgressiveQuantizedCache": "cache",
    "FixedBitsCache": "cache",
    "KVBudgetError": "cache",
    "mem_bytes": "cache",
    "kv_sensitivity": "sensitivity",
    "allocate_memory": "allocation",
    "calibrate_reparameterization": "reparam",
    "RepScales": "reparam",
    "pi_position_ids": "arch",
    "pm_kvq": "pipeline",
    "PMKVQPlan": "pipeline",
}

__all__ = [  # noqa: RUF022 - grouped as in the spec
    "__version__",
    "quantize_groups",
    "QuantizedGroups",
    "equivalent_right_shift",
    "naive_right_shift",
    "ProgressiveQuantizedCache",
    "FixedBitsCache",
    "KVBudgetError",
    "mem_bytes",
    "kv_sensitivity",
    "allocate_memory",
    "calibrate_reparameterization",
    "RepScales",
    "pi_position_ids",
    "pm_kvq",
    "PMKVQPlan",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .allocation import allocate_memory
    from .arch import pi_position_ids
    from .cache import FixedBitsCache, KVBudgetError, ProgressiveQuantizedCache, mem_bytes
    from .pipeline import PMKVQPlan, pm_kvq
    from .quantizer import QuantizedGroups, equivalent_right_shift, naive_right_shift, quantize_groups
    from .reparam import RepScales, calibrate_reparameterization
    from .sensitivity import kv_sensitivity

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
