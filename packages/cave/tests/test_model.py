"""Φ on a tiny transformers ResNet, NOVUM's loss against a naive loop, the momentum update, save/load, bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from iclr26_cave import CaveModel, extract_concepts
from iclr26_core.errors import UserError


def tiny(counts=(5, 4), seed=0, **kw):
    g = torch.Generator().manual_seed(seed)
    verts = {y: torch.randn(c, 3, generator=g) for y, c in enumerate(counts)}
    return CaveModel.create(verts, feature_dim=8, seed=seed, **kw)


def test_features_are_unit_norm_on_an_8x8_grid():
    model = tiny()
    f = model.features(torch.rand(2, 3, 32, 32))
    assert f.shape == (2, 8, 8, 8)
    assert torch.allclose(f.norm(dim=1), torch.ones(2, 8, 8), atol=1e-5)
    assert type(model.phi.backbone).__name__ == "ResNetBackbone"


def naive_loss(model, images, p2v, labels):
    """Per visible vertex: its projection = mean pixel, feature at that cell, negatives by the rule, loop."""
    feats = model.features(images)
    stride = images.shape[-1] // feats.shape[-1]
    cfg, vol, clut = model.config, model.volume, model.clutter
    offsets = [0, cfg.vertex_counts[0]]
    losses = []
    for i in range(len(images)):
        y = int(labels[i])
        seen = sorted(set(p2v[i][p2v[i] >= 0].tolist()))
        pos = {}
        for k in seen:
            ys, xs = (p2v[i] == k).nonzero(as_tuple=True)
            pos[k] = (xs.double().mean().item(), ys.double().mean().item())
        for k in seen:
            cx, cy = (math.floor((c + 0.5) / stride) for c in pos[k])
            f = feats[i, :, min(cy, 7), min(cx, 7)]
            gk = offsets[y] + k
            terms = [f @ vol[gk] / cfg.novum_temperature]
            for j in range(len(vol)):
                cls_j = 0 if j < offsets[1] else 1
                if j == gk:
                    continue
                if cls_j == y and (j - offsets[y]) in pos:
                    d = math.dist(pos[k], pos[j - offsets[y]])
                    if d <= cfg.distance:
                        continue
                terms.append(f @ vol[j] / cfg.novum_temperature)
            for c in clut:
                terms.append(f @ c / cfg.novum_temperature + math.log(cfg.clutter_weight))
            losses.append(torch.logsumexp(torch.stack(terms), 0) - terms[0])
    return torch.stack(losses).mean()


def test_novum_loss_matches_a_naive_loop():
    model = tiny(counts=(6, 5), distance=6.0)
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    p2v = torch.full((2, 32, 32), -1)
    g = torch.Generator().manual_seed(2)
    p2v[0, 4:16, 4:16] = torch.randint(0, 6, (12, 12), generator=g)
    p2v[0, 4:10, 4:10] = 2  # a vertex with a compact footprint
    p2v[1, 10:30, 8:20] = torch.randint(0, 5, (20, 12), generator=g)
    labels = torch.tensor([0, 1])
    ours = model.novum_loss(images, p2v, labels, update=False)
    naive = float(naive_loss(model, images, p2v, labels).detach())
    assert len(model.clutter) == 5 * 512  # the official LRU buffer of background features
    assert abs(model.last_terms["main"] - naive) < 1e-5
    assert abs(float(ours) - naive - model.last_terms["reg"]) < 1e-5


def _one_background_cell(n=2):
    """Object pixels everywhere except the 4×4 block of feature cell (7, 7): the only background cell."""
    p2v = torch.zeros(n, 32, 32, dtype=torch.long)
    p2v[:, 28:, 28:] = -1
    return p2v


def test_background_regulariser_is_a_tenth_of_the_mean_similarity():
    """loss_reg = 0.1·mean over the noise features (here all the one background cell) and every vertex feature."""
    model = tiny(counts=(6, 5))
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    p2v, labels = _one_background_cell(), torch.tensor([0, 1])
    model.novum_loss(images, p2v, labels, update=False)
    feats = model.features(images).detach()
    want = 0.1 * float(torch.stack([feats[i, :, 7, 7] @ model.volume.T for i in range(2)]).mean())
    assert abs(model.last_terms["reg"] - want) < 1e-6
    spec = tiny(counts=(6, 5), reg_weight=0.0)
    spec.novum_loss(images, p2v, labels, update=False)
    assert spec.last_terms["reg"] == 0.0


def test_clutter_buffer_is_least_recently_written_first():
    """n_clutter = 2 per image, max_group = 5: 10 rows; a 1-image batch writes k = 2 rows into slot s (rows 2s, 2s+1),
    the slots cycle over ⌊10 / 2⌋ = 5; the written rows are the (unit) background features."""
    model = tiny(counts=(6, 5), n_clutter=2, max_group=5)
    assert model.clutter.shape == (10, 8)
    images = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    p2v, labels = _one_background_cell(6), torch.tensor([0, 1, 0, 1, 0, 1])
    for step in range(6):
        before = model.clutter.clone()
        model.novum_loss(images[step : step + 1], p2v[step : step + 1], labels[step : step + 1])
        bg = model.features(images[step : step + 1]).detach()[0, :, 7, 7]
        s = step % 5
        assert torch.allclose(model.clutter[2 * s : 2 * s + 2], bg.expand(2, 8), atol=1e-5)
        others = [r for r in range(10) if r not in (2 * s, 2 * s + 1)]
        assert torch.equal(model.clutter[others], before[others])
    spec = tiny(counts=(6, 5), clutter_mode="momentum")
    assert spec.clutter.shape == (5, 8)


def test_official_volume_update_divides_by_the_class_images():
    """Vertex 1 (class 0) seen in 1 of the batch's 2 class-0 images: g ← normalize(m·g + (1−m)·f/2)."""
    model = tiny(counts=(6, 5))
    images = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(6))
    p2v = torch.full((3, 32, 32), -1)
    p2v[0, 4:8, 4:8] = 1  # one cell, (1, 1)
    p2v[1, 20:24, 20:24] = 0
    p2v[2, 8:12, 8:12] = 3
    before = model.volume.clone()
    model.novum_loss(images, p2v, torch.tensor([0, 0, 1]))
    f = model.features(images).detach()[0, :, 1, 1]
    m = model.config.momentum
    assert torch.allclose(model.volume[1], F.normalize(m * before[1] + (1 - m) * f / 2, dim=0), atol=1e-5)


def test_momentum_update_follows_its_formula():
    model = tiny()
    before = model.volume.clone()
    f = F.normalize(torch.randn(3, 8), dim=1)
    vid = torch.tensor([1, 1, 6])
    model.update_volumes(f, vid)
    m = model.config.momentum
    assert torch.allclose(
        model.volume[1], F.normalize(m * before[1] + (1 - m) * f[:2].mean(0), dim=0), atol=1e-6
    )
    assert torch.allclose(model.volume[6], F.normalize(m * before[6] + (1 - m) * f[2], dim=0), atol=1e-6)
    untouched = [k for k in range(9) if k not in (1, 6)]
    assert torch.equal(model.volume[untouched], before[untouched])


def test_save_load_round_trip_is_identical(tmp_path):
    model = tiny()
    model.visibility.fill_(3)
    model.class_images.fill_(4)
    extract_concepts(model, n_concepts=2)
    model.save_pretrained(tmp_path / "m")
    back = CaveModel.from_pretrained(tmp_path / "m").eval()
    x = torch.rand(2, 3, 32, 32)
    a, b = model.eval().classify(x), back.classify(x)
    assert torch.equal(a.logits, b.logits) and torch.equal(back.volume, model.volume)
    assert torch.equal(back.concept_classes, model.concept_classes)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("shape", "pix_to_vertex has shape (2, 16, 16), expected (2, 32, 32)"),
        ("vertex", "holds vertex id 9 >= V=5 of class 0"),
        ("label", "labels must lie in 0..1"),
    ],
)
def test_bad_targets_are_one_clear_error(case, message):
    model = tiny()
    images, p2v, labels = (
        torch.rand(2, 3, 32, 32),
        torch.zeros(2, 32, 32, dtype=torch.long),
        torch.tensor([0, 1]),
    )
    if case == "shape":
        p2v = p2v[:, :16, :16]
    elif case == "vertex":
        p2v[0, 0, 0] = 9
    else:
        labels = torch.tensor([0, 2])
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model.novum_loss(images, p2v, labels)


def test_empty_class_mesh_is_refused():
    with pytest.raises(UserError, match="class 1 has an empty mesh"):
        CaveModel.create({0: torch.randn(4, 3), 1: torch.zeros(0, 3)})
