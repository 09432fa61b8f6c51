"""iclr26-cave: CAVE, concept-aware neural object volumes, and 3D Consistency — arXiv 2503.13429 (ICLR 2026).

>>> import iclr26_cave as cave
>>> train = cave.render_dataset(1600)                                # synthetic renders with exact pixel-to-vertex maps
>>> model = cave.CaveModel.create(cave.meshes())                     # tiny random transformers ResNet + 4 volumes
>>> cave.train_novum(model, images, pix_to_vertex, labels)           # NOVUM: contrastive Φ, momentum volumes
>>> bank = cave.extract_concepts(model, n_concepts=8)                # spherical k-means per class
>>> out = model.classify(images)                                     # logits = Σ concept contributions
>>> maps = cave.concept_maps(out, images.shape[-2:])
>>> cave.consistency_3d(maps, pix_to_vertex, vertices).score         # 3D-C of any concept method's maps

Importing the package does not import torch: the public names below are loaded on first access (PEP 562).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-cave",
    {
        "model": "CaveModel CaveConfig novum_contrastive",
        "concepts": "ConceptBank extract_concepts spherical_kmeans",
        "decision": "CaveOutput cave_logits box_region",
        "maps": "concept_maps",
        "consistency": "Consistency3D consistency_3d localisation global_coverage mesh_histograms",
        "render": "render_dataset render_arrays occlude_arrays meshes class_mesh project",
        "training": "train_novum train_ce",
        "baseline2d": "Classifier2D NMFConcepts",
    },
)
