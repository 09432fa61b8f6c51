"""iclr26-nerve: NerVE — eigenspectral dynamics of transformer feed-forward networks (ICLR 2026).

The public API is re-exported lazily, so that ``import iclr26_nerve`` (and the CLI's ``--help``) does
not import torch::

    from iclr26_nerve import analyze, NerVECallback, eigenspectrum, spectral_entropy
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-nerve",
    {
        "spectrum": "eigenspectrum spectral_entropy participation_ratio eigenvalue_early_enrichment jensen_shannon rankme layer_metrics LayerMetrics StreamingCovariance",
        "analysis": "analyze NerVEReport",
        "callback": "NerVECallback",
        "registry": "register_architecture REGISTRY",
        "variants": "build_gpt2 apply_variant load_gpt2_variant NerVEGPT2LMHeadModel",
        "blocks": "NerVEBlock",
        "config": "NerVEConfig",
        "errors": "NerVEError",
    },
)
