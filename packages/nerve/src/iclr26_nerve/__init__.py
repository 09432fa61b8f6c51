"""iclr26-nerve: NerVE — eigenspectral dynamics of transformer feed-forward networks (ICLR 2026).

The public API is re-exported lazily, so that ``import iclr26_nerve`` (and the CLI's ``--help``) does
not import torch::

    from iclr26_nerve import analyze, NerVECallback, eigenspectrum, spectral_entropy
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-nerve")

_EXPORTS = {
    "eigenspectrum": "spectrum",
    "spectral_entropy": "spectrum",
    "participation_ratio": "spectrum",
    "eigenvalue_early_enrichment": "spectrum",
    "jensen_shannon": "spectrum",
    "rankme": "spectrum",
    "layer_metrics": "spectrum",
    "LayerMetrics": "spectrum",
    "StreamingCovariance": "spectrum",
    "analyze": "analysis",
    "NerVEReport": "analysis",
    "NerVECallback": "callback",
    "register_architecture": "registry",
    "REGISTRY": "registry",
    "build_gpt2": "variants",
    "apply_variant": "variants",
    "NerVEConfig": "config",
    "NerVEError": "errors",
}
__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
