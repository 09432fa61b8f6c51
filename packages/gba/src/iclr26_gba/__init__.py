"""iclr26-gba: sparse autoencoders trained with Group Bias Adaptation (Chen et al., ICLR 2026).

The public API is re-exported lazily: ``import iclr26_gba`` does not import torch.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("iclr26-gba")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0"

_EXPORTS = {
    "SparseFeatureModel": "statistical_model",
    "TiedSAE": "sae",
    "TopKSAE": "sae",
    "L1SAE": "sae",
    "GroupBiasAdaptation": "bias_adaptation",
    "ba_update": "bias_adaptation",
    "taf_grid": "bias_adaptation",
    "train_sae": "training",
    "TrainedSAE": "training",
    "recovery_metrics": "metrics",
    "sae_metrics": "metrics",
    "cross_seed_consistency": "metrics",
    "hungarian_mcc": "metrics",
    "collect_activations": "activations",
    "resonance_sweep": "resonance",
    "GBAConfig": "config",
    "TrainConfig": "config",
    "GBAError": "errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'iclr26_gba' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
