"""Concept extraction: unit vectors, class tags, visibility filter, determinism, too few vertices."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr26_cave import extract_concepts, spherical_kmeans
from iclr26_core.errors import UserError


def volumes(seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = F.normalize(torch.randn(3, 6, generator=g), dim=1)
    vol = F.normalize(centres.repeat_interleave(10, 0) + 0.05 * torch.randn(30, 6, generator=g), dim=1)
    return torch.cat([vol, vol.flip(0)]), torch.arange(2).repeat_interleave(30)


def test_concepts_are_unit_tagged_filtered_and_deterministic():
    vol, vcls = volumes()
    vis = torch.ones(60)
    vis[:5] = 0.05  # below min_visibility: never a member
    bank = extract_concepts(vol, n_concepts=3, vertex_class=vcls, visibility=vis, seed=1)
    assert torch.allclose(bank.vectors.norm(dim=1), torch.ones(6), atol=1e-6)
    assert bank.classes.tolist() == [0, 0, 0, 1, 1, 1]
    members = torch.cat(bank.members)
    assert not set(range(5)) & set(members.tolist()) and len(members) == 55
    assert all((vcls[m] == bank.classes[t]).all() for t, m in enumerate(bank.members))
    again = extract_concepts(vol, n_concepts=3, vertex_class=vcls, visibility=vis, seed=1)
    assert torch.equal(bank.vectors, again.vectors)
    # h_t is the renormalised mean of its members
    assert torch.allclose(bank.vectors[0], F.normalize(vol[bank.members[0]].mean(0), dim=0), atol=1e-6)


def test_spherical_kmeans_recovers_planted_clusters():
    vol, _ = volumes()
    labels = spherical_kmeans(vol[:30], 3, seed=0)
    groups = {tuple(sorted(set(labels[i : i + 10].tolist()))) for i in range(0, 30, 10)}
    assert all(len(g) == 1 for g in groups) and len({g[0] for g in groups}) == 3


def test_hdbscan_option_discards_noise():
    vol, vcls = volumes()
    bank = extract_concepts(vol, method="hdbscan", vertex_class=vcls)
    assert len(bank) >= 2 and set(bank.classes.tolist()) == {0, 1}


def test_too_few_eligible_vertices_is_one_clear_error():
    vol, vcls = volumes()
    vis = torch.ones(60)
    vis[30:55] = 0.0  # class 1 keeps 5 vertices
    with pytest.raises(UserError, match="class 1 has 5 eligible vertices < n_concepts=8"):
        extract_concepts(vol, n_concepts=8, vertex_class=vcls, visibility=vis)
