"""iclr26-isoenergy: Iso-Energy aligned sparse autoencoders for vision-language embeddings
(Dhimoïla, Fel, Boutin, Picard, ICLR 2026, arXiv 2602.06218).

The public API is re-exported lazily: ``import iclr26_isoenergy`` does not import torch.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-isoenergy",
    {
        "toy": "IsoEnergyToy",
        "sae": "MatchingPursuitSAE",
        "losses": "alignment_loss iso_energy_loss reconstruction_loss top1_mask",
        "training": "train_aligned_sae TrainedSAE beta_sweep one_cycle",
        "energy": "energy_report energies_from_codes EnergyReport restrict",
        "gap": "modality_gap recall_at_1 wasserstein_cosine mean_center shift_gap gap_table",
        "recovery": "r2_score dictionary_distance max_cosine_agreement merged_rate",
        "embed": "embed_pairs tiny_clip digit_pairs",
        "validate": "check_pairs IsoEnergyError",
        "config": "SAEConfig TrainConfig",
        "findings": "modality_probes bridge_matrix bridge_rho vector_edit recall_at_k knn_distance edit_scores",
    },
)
