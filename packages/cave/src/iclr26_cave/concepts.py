"""Concept extraction (spec Method §2): per class, the vertex features seen in more than ``min_visibility`` of its
training images are clustered into ``n_concepts`` concepts; h_t = normalize(mean of its members).

Default: spherical k-means (k-means on unit vectors with cosine assignment and renormalised centres), seeded;
``method="hdbscan"``: scikit-learn's HDBSCAN on the unit vectors (label −1 = noise, discarded; the number of
concepts is then the number of clusters found). Vertex features of different classes are never clustered together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError


@dataclass
class ConceptBank:
    """H [T,D] unit concept vectors, cls(t) [T], and each concept's member vertices (global ids)."""

    vectors: torch.Tensor
    classes: torch.Tensor
    members: list[torch.Tensor] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.vectors)


def spherical_kmeans(x: torch.Tensor, k: int, seed: int = 0, iters: int = 50) -> torch.Tensor:
    """Labels [n] of spherical k-means on unit rows of ``x`` (k-means++ seeding on cosine distance)."""
    g = torch.Generator().manual_seed(seed)
    x = F.normalize(x.double(), dim=1)
    n = len(x)
    centres = [x[torch.randint(n, (1,), generator=g)].squeeze(0)]
    for _ in range(1, k):
        d = (1 - x @ torch.stack(centres).T).clamp_min(0).min(1).values
        p = d / d.sum() if d.sum() > 0 else torch.full((n,), 1.0 / n, dtype=x.dtype)
        centres.append(x[torch.multinomial(p, 1, generator=g)].squeeze(0))
    c = torch.stack(centres)
    labels = torch.zeros(n, dtype=torch.long)
    for _ in range(iters):
        new = (x @ c.T).argmax(1)
        for j in range(k):
            members = x[new == j]
            if len(members):
                c[j] = F.normalize(members.mean(0), dim=0)
            else:  # an empty cluster takes the point farthest from its centre
                far = (x * c[new]).sum(1).argmin()
                c[j] = x[far]
                new[far] = j
        if torch.equal(new, labels):
            break
        labels = new
    return labels


def extract_concepts(
    model_or_volumes,
    n_concepts: int = 20,
    method: str = "kmeans",
    min_visibility: float = 0.1,
    seed: int = 0,
    vertex_class: torch.Tensor | None = None,
    visibility: torch.Tensor | None = None,
) -> ConceptBank:
    """The concept bank of a trained `CaveModel` (or of ``volumes`` [V,D] with ``vertex_class`` [V] and
    ``visibility`` [V] = fraction of the class's training images showing each vertex). A `CaveModel` also stores
    the bank (``model.set_concepts``)."""
    model = None
    if hasattr(model_or_volumes, "volume"):
        model = model_or_volumes
        volumes, vertex_class = model.volume, model.vertex_class
        per_class = model.class_images.clamp_min(1)[vertex_class]
        visibility = model.visibility / per_class
    else:
        volumes = model_or_volumes
        if vertex_class is None:
            raise UserError("extract_concepts on raw volumes needs vertex_class")
        if visibility is None:
            visibility = torch.ones(len(volumes))
    if method not in ("kmeans", "hdbscan"):
        raise UserError(f"method must be 'kmeans' or 'hdbscan', got {method!r}")
    volumes, vertex_class, visibility = volumes.detach().cpu(), vertex_class.cpu(), visibility.cpu()
    vectors, classes, members = [], [], []
    for y in range(int(vertex_class.max()) + 1):
        ids = ((vertex_class == y) & (visibility > min_visibility)).nonzero()[:, 0]
        if method == "kmeans" and len(ids) < n_concepts:
            raise UserError(f"class {y} has {len(ids)} eligible vertices < n_concepts={n_concepts}")
        x = volumes[ids]
        if method == "kmeans":
            labels = spherical_kmeans(x, n_concepts, seed=seed)
        else:
            from sklearn.cluster import HDBSCAN

            labels = torch.as_tensor(HDBSCAN(min_cluster_size=3, copy=True).fit_predict(x.double().numpy()))
        for j in sorted(set(labels.tolist()) - {-1}):
            m = ids[labels == j]
            vectors.append(F.normalize(volumes[m].double().mean(0), dim=0).float())
            classes.append(y)
            members.append(m)
    if not vectors:
        raise UserError("no concepts found (every vertex was filtered out or labelled noise)")
    bank = ConceptBank(torch.stack(vectors), torch.tensor(classes), members)
    if model is not None:
        model.set_concepts(bank)
    return bank
