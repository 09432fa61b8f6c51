"""iclr26-gba: sparse autoencoders trained with Group Bias Adaptation (Chen et al., ICLR 2026).

The public API is re-exported lazily: ``import iclr26_gba`` does not import torch.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-gba",
    {
        "statistical_model": "SparseFeatureModel",
        "sae": "TiedSAE TopKSAE L1SAE",
        "bias_adaptation": "GroupBiasAdaptation ba_update taf_grid",
        "training": "train_sae TrainedSAE",
        "metrics": "recovery_metrics sae_metrics cross_seed_consistency hungarian_mcc",
        "activations": "collect_activations",
        "resonance": "resonance_sweep",
        "config": "GBAConfig TrainConfig",
        "errors": "GBAError",
    },
)
