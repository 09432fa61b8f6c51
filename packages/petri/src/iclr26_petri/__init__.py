"""iclr26-petri: PETRI, early-fusion joint reconstruction of unpaired cell images and expression (ICLR 2026).

>>> import iclr26_petri as petri
>>> screen = petri.synthetic_screen(seed=0)
>>> model = petri.PetriModel(petri.PetriConfig(n_genes=128))
>>> emb = petri.embed(model, images=screen.images[:10])      # pre-MST cell embeddings [10, D]

Importing the package does not import torch: names load on first access (``iclr26-petri --help`` stays fast).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-petri",
    {
        "config": "PetriConfig",
        "model": "PetriModel PetriOutput DocumentBatch",
        "documents": "make_documents DocumentPlan",
        "likelihood": "nb_nll",
        "embedding": "embed embed_documents",
        "profiles": "perturbation_profiles Profiles robust_center_scale spherize",
        "metrics": "guide_consistency GCResult relationship_recall RecallResult benjamini_hochberg",
        "sae": "multimodal_dims SAEResult BatchTopKSAE",
        "training": "train_petri",
        "data": "synthetic_screen Screen",
    },
)
