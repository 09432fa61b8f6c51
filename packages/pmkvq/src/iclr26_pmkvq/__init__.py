"""iclr26-pmkvq: PM-KVQ, progressive mixed-precision KV cache quantisation (arXiv 2505.18610, ICLR 2026).

>>> import iclr26_pmkvq as pm
>>> plan = pm.pm_kvq(model, calib_batches, budget_mb=64, max_len=32768)   # reparameterises model in place
>>> out = model.generate(ids, max_new_tokens=4096, past_key_values=plan.cache())
>>> cache = pm.ProgressiveQuantizedCache([budget_bytes] * n_layers, window=128)   # by hand

Importing the package does not import torch: the public names below are loaded on first access
(PEP 562 module ``__getattr__``), so ``iclr26-pmkvq --help`` stays fast.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-pmkvq",
    {
        "quantizer": "quantize_groups QuantizedGroups equivalent_right_shift naive_right_shift",
        "cache": "ProgressiveQuantizedCache FixedBitsCache KVBudgetError mem_bytes",
        "kivi": "KIVICache ProgressiveKIVICache",
        "sensitivity": "kv_sensitivity",
        "allocation": "allocate_memory",
        "reparam": "calibrate_reparameterization RepScales",
        "arch": "pi_position_ids",
        "pipeline": "pm_kvq PMKVQPlan",
    },
)
