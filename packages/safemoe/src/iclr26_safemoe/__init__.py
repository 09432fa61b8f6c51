"""iclr26-safemoe: SafeMoE — safe fine-tuning of MoE LLMs by aligning harmful-input routing (arXiv 2509.22745).

>>> import iclr26_safemoe as sm
>>> ref = sm.reference_routing(aligned_model, safe_inputs)          # [N, L, E] raw router logits at t*
>>> res = sm.safemoe_finetune(aligned_model, train_data, safe_inputs, reference=ref)

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-safemoe",
    {
        "config": "SafeMoEConfig",
        "routing": "router_logits capture_router_logits reference_routing RoutingReference "
        "routing_alignment_loss routing_drift logit_spread last_token_index",
        "experts": "safety_critical_experts selection_frequency mask_experts",
        "registry": "register_router find_gates",
        "callback": "SafeMoECallback",
        "finetune": "safemoe_finetune alignment_phase FinetuneResult",
        "temperature": "miniature_tau olmoe_config_sigma",
    },
)
