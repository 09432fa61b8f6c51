"""Semantic inference against naive loops; mIoU against a hand-computed confusion matrix, the core's pooled mIoU
and torchmetrics; the shapes data (every drawn shape labelled, labels identical across domains)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26_core.evaluation import miou as core_miou
from iclr26_qprompt.data import DOMAINS, draw_scene, render, shapes_arrays, shapes_dataset, shapes_domains
from iclr26_qprompt.inference import confusion_matrix, iou_per_class, miou, semantic_inference
from iclr26_qprompt.peers import torchmetrics_miou


def test_semantic_inference_against_naive_loops():
    g = torch.Generator().manual_seed(0)
    cls, masks = torch.randn(2, 3, 5, generator=g), torch.randn(2, 3, 4, 4, generator=g)
    pred = semantic_inference(cls, masks, (4, 4))
    for b in range(2):
        for i in range(4):
            for j in range(4):
                scores = [
                    sum(
                        float(torch.softmax(cls[b, k], 0)[c]) / (1 + np.exp(-float(masks[b, k, i, j])))
                        for k in range(3)
                    )
                    for c in range(4)  # the 5th column is no-object
                ]
                assert pred[b, i, j] == int(np.argmax(scores))


def test_miou_hand_computed_with_absent_classes_and_ignore():
    target = np.array([[0, 0, 1, 255], [1, 1, 2, 2]])
    pred = np.array([[0, 1, 1, 3], [1, 0, 2, 2]])
    conf = confusion_matrix(pred, target, 5)
    # by hand: class 0: TP 1, FP 1 (pred 0 at gt 1), FN 1 -> 1/3; class 1: TP 2, FP 1, FN 1 -> 2/4; class 2: 1;
    # class 3 is predicted only at an ignored pixel, class 4 nowhere: both excluded
    expected = [1 / 3, 2 / 4, 1.0]
    np.testing.assert_allclose(iou_per_class(conf)[:3], expected)
    assert np.isnan(iou_per_class(conf)[3:]).all()
    assert miou(conf) == pytest.approx(np.mean(expected))
    assert miou(conf) == pytest.approx(core_miou(pred, target, 5, ignore_index=255))
    tm = torchmetrics_miou(pred, target, 5)
    if tm is not None:
        assert tm == pytest.approx(np.mean(expected))


def test_miou_against_torchmetrics_on_random_maps():
    pytest.importorskip("torchmetrics")
    rng = np.random.default_rng(1)
    target = rng.integers(0, 4, (3, 16, 16))
    target[0, :4] = 255
    pred = rng.integers(0, 5, (3, 16, 16))
    assert torchmetrics_miou(pred, target, 6) == pytest.approx(miou(confusion_matrix(pred, target, 6)))


def test_every_drawn_shape_is_labelled_and_domains_keep_labels():
    rng = np.random.default_rng(0)
    for _ in range(20):
        scene = draw_scene(rng)
        classes = {int(k) for k, *_ in scene["shapes"]}
        last = {}
        for kind, rr, cc, _u in scene["shapes"]:
            for r, c in zip(rr, cc, strict=True):
                last[(r, c)] = kind
        assert {int(v) for v in last.values()} <= classes
        assert set(np.unique(scene["label"])) - {0} == set(last.values())  # painted in order, later on top
        for dom in DOMAINS:
            img = render(scene, dom)
            assert img.shape == (64, 64, 3) and img.min() >= 0 and img.max() <= 1
    images, labels = shapes_domains(6, DOMAINS, seed=5)
    for dom in DOMAINS:
        _, lab = shapes_arrays(6, dom, seed=5)
        np.testing.assert_array_equal(lab, labels)
        np.testing.assert_array_equal(shapes_arrays(6, dom, seed=5)[0], images[dom])
    assert not np.array_equal(images["source"], images["style"])


def test_shapes_dataset_columns():
    ds = shapes_dataset(3, "fog", seed=1)
    assert ds.column_names == ["image", "label"] and ds[0]["image"].shape == (64, 64, 3)
    assert np.issubdtype(ds[0]["label"].dtype, np.integer) and ds[0]["label"].max() <= 4
