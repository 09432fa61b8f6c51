"""iclr26-isoenergy: Iso-Energy aligned sparse autoencoders for vision-language embeddings
(Dhimoïla, Fel, Boutin, Picard, ICLR 2026, arXiv 2602.06218).

The public API is re-exported lazily: ``import iclr26_isoenergy`` does not import torch.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-isoenergy")

_EXPORTS = {
    "IsoEnergyToy": "toy",
    "MatchingPursuitSAE": "sae",
    "alignment_loss": "losses",
    "iso_energy_loss": "losses",
    "reconstruction_loss": "losses",
    "top1_mask": "losses",
    "train_aligned_sae": "training",
    "TrainedSAE": "training",
    "beta_sweep": "training",
    "one_cycle": "training",
    "energy_report": "energy",
    "energies_from_codes": "energy",
    "EnergyReport": "energy",
    "restrict": "energy",
    "modality_gap": "gap",
    "recall_at_1": "gap",
    "wasserstein_cosine": "gap",
    "mean_center": "gap",
    "shift_gap": "gap",
    "gap_table": "gap",
    "r2_score": "recovery",
    "dictionary_distance": "recovery",
    "max_cosine_agreement": "recovery",
    "merged_rate": "recovery",
    "embed_pairs": "embed",
    "tiny_clip": "embed",
    "digit_pairs": "embed",
    "check_pairs": "validate",
    "IsoEnergyError": "validate",
    "SAEConfig": "config",
    "TrainConfig": "config",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
