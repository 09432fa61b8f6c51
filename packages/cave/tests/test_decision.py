"""The decision rule against a naive per-pixel loop; exact decomposition; volume matching; region; concept maps."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from iclr26_cave import ConceptBank, cave_logits, concept_maps


def naive(features, vectors, classes, region=None):
    b, _, h, w = features.shape
    t_tot, n_cls = len(vectors), int(classes.max()) + 1
    logits = [[0.0] * n_cls for _ in range(b)]
    for i in range(b):
        for y in range(h):
            for x in range(w):
                if region is not None and not region[i, y, x]:
                    continue
                f = features[i, :, y, x].tolist()
                best, arg = -1e9, -1
                for t in range(t_tot):
                    s = sum(a * c for a, c in zip(vectors[t].tolist(), f, strict=True)) / 2 + 0.5
                    if s > best:
                        best, arg = s, t
                logits[i][int(classes[arg])] += best / t_tot
    return torch.tensor(logits, dtype=torch.float64)


@pytest.fixture
def case():
    g = torch.Generator().manual_seed(0)
    feats = F.normalize(torch.randn(3, 5, 4, 6, generator=g, dtype=torch.float64), dim=1)
    vectors = F.normalize(torch.randn(7, 5, generator=g, dtype=torch.float64), dim=1)
    classes = torch.tensor([0, 0, 1, 2, 2, 2, 1])
    return feats, ConceptBank(vectors, classes)


def test_logits_match_a_naive_loop_and_decompose(case):
    feats, bank = case
    out = cave_logits(feats, bank)
    assert torch.allclose(out.logits, naive(feats, bank.vectors, bank.classes), atol=1e-12)
    summed = torch.stack([out.contributions[:, bank.classes == y].sum(1) for y in range(3)], 1)
    assert (summed - out.logits).abs().max() < 1e-6


def test_region_excludes_pixels(case):
    feats, bank = case
    region = torch.rand(3, 4, 6, generator=torch.Generator().manual_seed(1)) > 0.5
    out = cave_logits(feats, bank, region)
    assert torch.allclose(out.logits, naive(feats, bank.vectors, bank.classes, region), atol=1e-12)
    assert (out.assignment[~region] == -1).all() and (out.scores[~region] == 0).all()


def test_one_concept_per_vertex_is_volume_matching():
    """Volume matching by hand: every pixel's nearest vertex votes for its class with its score / V."""
    g = torch.Generator().manual_seed(2)
    feats = F.normalize(torch.randn(2, 4, 3, 3, generator=g, dtype=torch.float64), dim=1)
    volume = F.normalize(torch.randn(9, 4, generator=g, dtype=torch.float64), dim=1)
    vclass = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2])
    out = cave_logits(feats, ConceptBank(volume, vclass, [torch.tensor([k]) for k in range(9)]))
    sim = torch.einsum("vd,bdhw->bvhw", volume, feats).flatten(2)  # [B,V,hw]
    best = sim.argmax(1)
    score = sim.max(1).values / 2 + 0.5
    expected = torch.zeros(2, 3, dtype=torch.float64)
    for y in range(3):
        expected[:, y] = (score * (vclass[best] == y)).sum(1) / 9
    assert torch.allclose(out.logits, expected, atol=1e-12)


def test_concept_maps_are_the_scores_of_the_assigned_concept(case):
    feats, bank = case
    out = cave_logits(feats, bank)
    maps = concept_maps(out, (8, 12))
    assert maps.shape == (3, 7, 8, 12)
    # each pixel's maps sum to its score, upsampled by nearest neighbour
    assert torch.allclose(maps.sum(1), out.scores.repeat_interleave(2, 1).repeat_interleave(2, 2))
    # the contributions are the maps' sums at feature resolution / T
    assert torch.allclose(maps.sum((2, 3)) / 4 / 7, out.contributions)


def test_feature_dimension_mismatch_is_one_clear_error(case):
    from iclr26_core.errors import UserError

    feats, bank = case
    with pytest.raises(UserError, match="feature dimension 4 != concept bank dimension 5"):
        cave_logits(feats[:, :4], bank)


def test_box_region_is_the_official_crop_on_the_feature_grid(case):
    """Box (y0, y1, x0, x1) = (5, 27, 9, 10) on a 32×32 image, 8×8 grid (stride 4): rows 5//4 = 1 .. 27//4 = 6
    (exclusive), columns 9//4 = 2 .. 10//4 = 2 -> empty, so one column (2); the official code slices the same."""
    from iclr26_cave.decision import box_region

    region = box_region(torch.tensor([[5, 27, 9, 10], [0, 32, 0, 32]]), 32, (8, 8))
    want = torch.zeros(8, 8, dtype=torch.bool)
    want[1:6, 2:3] = True
    assert torch.equal(region[0], want) and region[1].all()
    feats = F.normalize(
        torch.randn(2, 5, 8, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64), dim=1
    )
    _, bank = case
    sliced = cave_logits(feats[:1, :, 1:6, 2:3], bank, num_classes=3)  # the official crop of the feature map
    assert torch.allclose(
        cave_logits(feats, bank, region, num_classes=3).logits[:1], sliced.logits, atol=1e-12
    )
