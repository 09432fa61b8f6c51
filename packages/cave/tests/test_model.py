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
    assert torch.allclose(ours, naive_loss(model, images, p2v, labels), atol=1e-5)


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
