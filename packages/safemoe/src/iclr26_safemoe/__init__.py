"""iclr26-safemoe: SafeMoE — safe fine-tuning of MoE LLMs by aligning harmful-input routing (arXiv 2509.22745).

>>> import iclr26_safemoe as sm
>>> ref = sm.reference_routing(aligned_model, safe_inputs)          # [N, L, E] raw router logits at t*
>>> res = sm.safemoe_finetune(aligned_model, train_data, safe_inputs, reference=ref)

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("iclr26-safemoe")
except PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.0.0"

_EXPORTS: dict[str, str] = {
    "SafeMoEConfig": "config",
    "router_logits": "routing",
    "capture_router_logits": "routing",
    "reference_routing": "routing",
    "RoutingReference": "routing",
    "routing_alignment_loss": "routing",
    "routing_drift": "routing",
    "last_token_index": "routing",
    "safety_critical_experts": "experts",
    "selection_frequency": "experts",
    "mask_experts": "experts",
    "register_router": "registry",
    "find_gates": "registry",
    "SafeMoECallback": "finetune",
    "safemoe_finetune": "finetune",
    "alignment_phase": "finetune",
    "FinetuneResult": "finetune",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'iclr26_safemoe' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
