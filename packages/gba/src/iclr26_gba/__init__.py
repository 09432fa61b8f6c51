"""iclr26-gba: sparse autoencoders trained with Group Bias Adaptation (Chen et al., ICLR 2026).

The public API is re-exported lazily: ``import iclr26_gba`` does not import torch.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-gba")

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
