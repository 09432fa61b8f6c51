"""The 2D baseline: the same Φ backbone + global average pooling + linear, trained by cross-entropy, and post-hoc
CRAFT-like concepts on it: per class, scikit-learn NMF (8 components) on the ReLU'd pre-projection Φ map of that
class's training images (pixels as samples); a concept map is the NMF coefficient map of a new image's pixels."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .model import TINY_RESNET, PixelFeatures, build_backbone


class Classifier2D(nn.Module):
    """Φ's backbone maps (the deep one upsampled and concatenated), GAP, linear."""

    def __init__(self, num_classes: int = 4, backbone_config: dict | None = None):
        super().__init__()
        self.phi = PixelFeatures(build_backbone(backbone_config or TINY_RESNET), 1)
        self.head = nn.Linear(self.phi.channels, num_classes)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        """The ReLU'd pre-projection map [B,C,h,w] (CAVE's grid)."""
        return torch.relu(self.phi.pre(images))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.phi.pre(images).mean((2, 3)))


class NMFConcepts:
    """Per-class NMF concept bases fitted on the 2D model's feature maps."""

    def __init__(self, n_concepts: int = 8, seed: int = 0):
        self.n_concepts, self.seed, self.models = n_concepts, seed, {}

    def fit(self, maps: torch.Tensor, labels: torch.Tensor) -> NMFConcepts:
        from sklearn.decomposition import NMF

        for y in sorted(set(labels.tolist())):
            x = maps[labels == y].permute(0, 2, 3, 1).reshape(-1, maps.shape[1]).double().numpy()
            nmf = NMF(self.n_concepts, init="nndsvda", max_iter=400, random_state=self.seed)
            nmf.fit(np.maximum(x, 0))
            self.models[y] = nmf
        return self

    def maps(self, maps: torch.Tensor, cls: int) -> torch.Tensor:
        """Coefficient maps [B,K,h,w] of ``maps`` [B,C,h,w] under class ``cls``'s basis."""
        b, c, h, w = maps.shape
        x = np.maximum(maps.permute(0, 2, 3, 1).reshape(-1, c).double().numpy(), 0)
        coef = self.models[cls].transform(x)
        return torch.from_numpy(coef).float().reshape(b, h, w, -1).permute(0, 3, 1, 2)
