"""iclr26-nerve: NerVE — eigenspectral dynamics of transformer feed-forward networks (ICLR 2026).

The public API is re-exported lazily, so that ``import iclr26_nerve`` (and the CLI's ``--help``) does
not import torch::

    from iclr26_nerve import analyze, NerVECallback, eigenspectrum, spectral_entropy
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("iclr26-nerve")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

_EXPORTS = {
    "eigenspectrum": "spectrum",
    "spectral_entropy": "spectrum",
    "participation_ratio": "spectrum",
    "eigenvalue_early_enrichment": "spectrum",
    "jensen_shannon": "spectrum",
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


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
