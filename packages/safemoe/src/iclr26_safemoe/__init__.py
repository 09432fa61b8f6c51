"""iclr26-safemoe: SafeMoE — safe fine-tuning of MoE LLMs by aligning harmful-input routing (arXiv 2509.22745).

>>> import iclr26_safemoe as sm
>>> ref = sm.reference_routing(aligned_model, safe_inputs)          # [N, L, E] raw router logits at t*
>>> res = sm.safemoe_finetune(aligned_model, train_data, safe_inputs, reference=ref)

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-safemoe")

_EXPORTS: dict[str, str] = {
    "SafeMoEConfig": "config",
    "router_logits": "routing",
    "capture_router_logits": "routing",
    "reference_routing": "routing",
    "RoutingReference": "routing",
    "routing_alignment_loss": "routing",
    "routing_drift": "routing",
    "logit_spread": "routing",
    "last_token_index": "routing",
    "safety_critical_experts": "experts",
    "selection_frequency": "experts",
    "mask_experts": "experts",
    "register_router": "registry",
    "find_gates": "registry",
    "SafeMoECallback": "callback",
    "safemoe_finetune": "finetune",
    "alignment_phase": "finetune",
    "FinetuneResult": "finetune",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
