"""The modality-gap world (0.3, ``view_offset_deg`` φ): each view of a concept is split from it by construction,
checked independently of the toy's own atom bookkeeping (from the samples and with numpy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26_isoenergy import IsoEnergyToy
from iclr26_isoenergy.recovery import cosine_matrix, dictionary_distance, max_cosine_agreement
from iclr26_isoenergy.validate import IsoEnergyError


def _concept_parts(toy: IsoEnergyToy, n: int, seed: int = 0):
    """The shared-concept part of each sample, recovered from the samples themselves: ‖x‖·x minus the
    unimodal atom and the bias (noise 0), with the raw concept coefficients [n, C]."""
    img, txt, codes = toy.sample(n, seed=seed, return_codes=True)
    a = toy.atoms
    n_i = (codes["shared_image"].sum(1) / codes["raw_image"].sum(1))[:, None]  # 1/‖x_I‖ per row
    n_t = (codes["shared_text"].sum(1) / codes["raw_text"].sum(1))[:, None]
    part_i = img / n_i - (codes["image_only"] / n_i) @ a["image"] - toy.bias * a["bias_image"]
    part_t = txt / n_t - (codes["text_only"] / n_t) @ a["text"] - toy.bias * a["bias_text"]
    return part_i.double().numpy(), part_t.double().numpy(), codes["raw_image"].double().numpy()


@pytest.mark.parametrize("phi", [30.0, 70.0])
def test_views_of_a_concept_are_split_as_designed(phi):
    toy = IsoEnergyToy(d=32, n_shared=10, n_image=3, n_text=3, noise=0.0, view_offset_deg=phi, seed=4)
    part_i, part_t, coef = _concept_parts(toy, 400)
    # one concept's view direction, by least squares from the samples: part = coef @ views
    views_i = np.linalg.lstsq(coef, part_i, rcond=None)[0]  # [C, d]
    views_t = np.linalg.lstsq(coef, part_t, rcond=None)[0]
    s = toy.atoms["shared"].double().numpy()

    def cos(a, b):
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    c = math.cos(math.radians(phi))
    np.testing.assert_allclose(cos(views_i, s), c, atol=1e-6)  # each view is at φ from its concept
    np.testing.assert_allclose(cos(views_t, s), c, atol=1e-6)
    np.testing.assert_allclose(cos(views_i, views_t), c**2, atol=1e-6)  # and at cos²φ from the other view
    # the offsets (view − cos φ·S_c) of the two modalities are orthogonal to each other and to the concept
    off_i, off_t = views_i - c * s, views_t - c * s
    np.testing.assert_allclose((off_i * off_t).sum(1), 0.0, atol=1e-6)
    np.testing.assert_allclose((off_i * s).sum(1), 0.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(off_i, axis=1), math.sin(math.radians(phi)), atol=1e-6)


def test_split_dictionary_scores_cos_phi_and_the_concepts_score_one():
    toy = IsoEnergyToy(view_offset_deg=70.0)
    a = toy.atoms
    others = [a["image"], a["text"], a["bias_image"][None], a["bias_text"][None]]
    split = torch.cat([a["image_shared"], a["text_shared"], *others])
    merged = torch.cat([a["shared"], *others])
    # the views are not truth atoms: a concept's own views are at cos φ from it, so a dictionary of the views
    # scores about cos φ on the concepts (other atoms may come a little closer by chance); the concepts score 1
    c = math.cos(math.radians(70))
    own = cosine_matrix(toy.truth("shared"), split)[:, :48].diagonal()
    assert torch.allclose(own, torch.full_like(own, c), atol=1e-6)
    assert c - 1e-9 <= max_cosine_agreement(toy.truth("shared"), split) < c + 0.05
    assert max_cosine_agreement(toy.truth("full"), merged) == pytest.approx(1.0, abs=1e-6)
    assert dictionary_distance(toy.truth("full"), merged) == pytest.approx(0.0, abs=1e-6)
    assert toy.truth("full").shape[0] == 48 + 8 + 8 + 2  # S_c, unimodal atoms, biases: no view atoms


def test_theta_world_is_unchanged_by_the_new_option():
    old, new = IsoEnergyToy(rotation_deg=45.0), IsoEnergyToy(view_offset_deg=45.0)
    for key in ("shared", "perp", "image", "text", "bias_image", "bias_text"):
        assert torch.equal(old.atoms[key], new.atoms[key])
    assert torch.equal(old.atoms["image_shared"], old.atoms["shared"])  # θ world: the image view is S_c
    assert old.truth("full").shape[0] == 48 * 2 + 18


def test_low_rank_gap_offsets_live_in_r_dimensional_subspaces():
    toy = IsoEnergyToy(view_offset_deg=60.0, gap_rank=2)
    c, s = math.cos(math.radians(60)), toy.atoms["shared"].double()
    off_i = toy.atoms["image_shared"].double() - c * s
    off_t = toy.atoms["text_shared"].double() - c * s
    rank = [torch.linalg.matrix_rank(o, atol=1e-5).item() for o in (off_i, off_t)]  # float32 atoms
    assert rank == [2, 2]
    assert (off_i @ off_t.T).abs().max() < 1e-6 and (off_i @ s.T).abs().max() < 1e-6


def test_bad_world_settings_are_one_error():
    with pytest.raises(IsoEnergyError, match="not both"):
        IsoEnergyToy(rotation_deg=45.0, view_offset_deg=30.0)
    with pytest.raises(IsoEnergyError, match="view_offset_deg"):
        IsoEnergyToy(view_offset_deg=120.0)
    with pytest.raises(IsoEnergyError, match="gap_rank"):
        IsoEnergyToy(d=8, view_offset_deg=30.0, gap_rank=4)


def test_alignment_term_acts_only_through_atoms_both_views_select():
    """The README's diagnosis: MP codes are hard selections, so −cos(z_I, z_T) has no gradient on the dictionary
    when the two views of a pair select disjoint atoms (the split), and one when they share an atom."""
    from iclr26_isoenergy import MatchingPursuitSAE, alignment_loss

    e = torch.eye(8)
    sae = MatchingPursuitSAE(8, 8, k=3)
    with torch.no_grad():
        sae.dictionary.copy_(e)

    def grad(img, txt):
        sae.zero_grad()
        z = sae.encode(torch.stack([img, txt]))
        alignment_loss(z[:1], z[1:]).backward()  # top-1 masking on, as in the paper
        return 0.0 if sae.dictionary.grad is None else float(sae.dictionary.grad.abs().max())

    img = e[0] + 0.5 * e[1] + 0.3 * e[4]
    assert grad(img, e[2] + 0.5 * e[3] + 0.3 * e[5]) == 0.0  # split: no atom in common
    assert grad(img, e[2] + 0.5 * e[1] + 0.3 * e[5]) > 1e-3  # atom 1 selected by both views
