"""LRP through Φ with zennit (spec Method §4): relevance is conserved through the residual blocks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from iclr26_cave import CaveModel, ConceptBank, concept_maps

pytestmark = pytest.mark.peers


def bias_free_model(seed=0):
    """A tiny model whose merged BatchNorm biases and projection bias are zero: LRP then conserves exactly (a
    bias absorbs relevance by design), so Σ input relevance must equal the concept contribution."""
    torch.manual_seed(seed)
    verts = {0: torch.randn(6, 3), 1: torch.randn(5, 3)}
    model = CaveModel.create(verts, feature_dim=8, seed=seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.bias.data.zero_()
            m.running_mean.zero_()
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
    model.phi.proj.bias.data.zero_()
    vectors = torch.nn.functional.normalize(torch.randn(4, 8), dim=1)
    model.set_concepts(ConceptBank(vectors, torch.tensor([0, 0, 1, 1])))
    return model.eval()


def test_input_relevance_sums_to_each_concept_contribution():
    model = bias_free_model()
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        out = model.classify(images)
    maps = concept_maps(out, (32, 32), method="lrp", model=model, images=images)
    assert maps.shape == (2, 4, 32, 32)
    totals = maps.sum((2, 3))
    assert out.contributions.abs().sum() > 0.1
    assert torch.allclose(totals, out.contributions, atol=1e-3, rtol=1e-3), (totals, out.contributions)
    # and so the logits: Σ over a class's concepts of the input relevance
    logits = torch.stack([totals[:, :2].sum(1), totals[:, 2:].sum(1)], 1)
    assert torch.allclose(logits, out.logits, atol=1e-3)


def test_without_the_residual_canonizer_relevance_is_not_conserved():
    """The in-place residual add seen by plain gradient flow duplicates relevance (zennit #236): the check above
    fails without our Sum canonizer."""
    from iclr26_cave.lrp import lrp_concept_maps

    model = bias_free_model()
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        out = model.classify(images)
    totals = lrp_concept_maps(model, images, residual_canonizer=False).sum((2, 3))
    assert (totals - out.contributions).abs().max() > 0.05 * out.contributions.abs().max()


def test_lrp_without_a_model_is_one_clear_error():
    from iclr26_core.errors import UserError

    model = bias_free_model()
    images = torch.rand(1, 3, 32, 32)
    with torch.no_grad():
        out = model.classify(images)
    with pytest.raises(UserError, match="model and images"):
        concept_maps(out, (32, 32), method="lrp")
