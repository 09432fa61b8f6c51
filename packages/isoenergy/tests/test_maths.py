"""The maths against independent computations: a naive numpy MP loop, closed forms, brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from iclr26_isoenergy import (
    IsoEnergyToy,
    MatchingPursuitSAE,
    alignment_loss,
    energies_from_codes,
    iso_energy_loss,
    modality_gap,
    one_cycle,
    recall_at_1,
    restrict,
    top1_mask,
    wasserstein_cosine,
)
from iclr26_isoenergy.recovery import dictionary_distance, max_cosine_agreement, merged_rate


def naive_mp(x: np.ndarray, atoms: np.ndarray, k: int) -> np.ndarray:
    """Matching pursuit, one row at a time, plain loops."""
    z = np.zeros((x.shape[0], atoms.shape[0]))
    for i in range(x.shape[0]):
        r = x[i].copy()
        for _ in range(k):
            s = [float(np.dot(r, a)) for a in atoms]
            j = int(np.argmax(s))
            z[i, j] += s[j]
            r = r - s[j] * atoms[j]
    return z


@pytest.mark.parametrize("normalize", [True, False])
def test_mp_encoder_matches_naive_loop(normalize):
    torch.manual_seed(0)
    sae = MatchingPursuitSAE(13, 37, k=5, normalize_atoms=normalize, seed=3)
    with torch.no_grad():
        sae.dictionary.mul_(torch.rand(37, 1) + 0.5)  # non-unit rows: normalisation matters
    x = torch.randn(9, 13, dtype=torch.float64)
    sae = sae.double()
    z = sae.encode(x).detach().numpy()
    atoms = sae.dictionary.detach().numpy()
    if normalize:
        atoms = atoms / np.linalg.norm(atoms, axis=1, keepdims=True)
    ref = naive_mp(x.numpy(), atoms, 5)
    assert np.array_equal(z != 0, ref != 0)  # the same selected atoms
    np.testing.assert_allclose(z, ref, atol=1e-10)
    np.testing.assert_allclose(sae.decode(torch.from_numpy(z)).detach().numpy(), ref @ atoms, atol=1e-10)


def test_mp_exact_for_orthonormal_dictionary_and_sparse_input():
    q, _ = torch.linalg.qr(
        torch.randn(16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    )
    sae = MatchingPursuitSAE(16, 16, k=3, seed=0).double()
    with torch.no_grad():
        sae.dictionary.copy_(q.T)
    z_true = torch.zeros(4, 16, dtype=torch.float64)
    for i, cols in enumerate([(0, 5, 9), (1, 2, 3), (15, 7, 4), (8, 10, 11)]):
        z_true[i, list(cols)] = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    x = z_true @ q.T
    x_hat, z = sae(x)
    torch.testing.assert_close(z, z_true, atol=1e-12, rtol=0)
    torch.testing.assert_close(x_hat, x, atol=1e-12, rtol=0)


def test_alignment_loss_identities():
    z = torch.tensor([[3.0, 1.0, 2.0, 0.0], [0.0, 5.0, 1.0, 1.0]])
    assert float(alignment_loss(z, z.clone())) == pytest.approx(-1.0)
    assert float(alignment_loss(z, z.clone(), mask_top1=False)) == pytest.approx(-1.0)
    # top-1 masking zeroes exactly the two argmax positions of each pair
    zi = torch.tensor([[3.0, 1.0, 2.0, 0.5], [0.0, 5.0, 1.0, 1.0]])
    zt = torch.tensor([[1.0, 0.2, 4.0, 0.5], [0.1, 6.0, 0.3, 2.0]])
    mask = top1_mask(zi, zt)
    assert mask.tolist() == [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 1.0]]
    a, b = zi * mask, zt * mask
    expect = -float(torch.nn.functional.cosine_similarity(a, b).mean())
    assert float(alignment_loss(zi, zt)) == pytest.approx(expect)
    # by hand for the first pair: masked (1, .5) vs (.2, .5)
    c0 = (1 * 0.2 + 0.25) / math.hypot(1, 0.5) / math.hypot(0.2, 0.5)
    c1 = (0.0 * 0.1 + 1 * 0.3 + 1 * 2) / math.sqrt(0 + 1 + 1) / math.sqrt(0.01 + 0.09 + 4)
    assert float(alignment_loss(zi, zt)) == pytest.approx(-(c0 + c1) / 2, rel=1e-6)


def test_alignment_loss_invariant_to_joint_atom_permutation():
    g = torch.Generator().manual_seed(0)
    zi, zt = torch.rand(8, 20, generator=g), torch.rand(8, 20, generator=g)
    perm = torch.randperm(20, generator=g)
    for mask in (True, False):
        assert float(alignment_loss(zi[:, perm], zt[:, perm], mask)) == pytest.approx(
            float(alignment_loss(zi, zt, mask)), rel=1e-6
        )
    assert float(iso_energy_loss(zi[:, perm], zt[:, perm])) == pytest.approx(float(iso_energy_loss(zi, zt)))


def test_gradients_reach_the_dictionary():
    sae = MatchingPursuitSAE(8, 24, k=4, seed=0)
    x = torch.randn(10, 8)
    _, z = sae(x)
    alignment_loss(z[:5], z[5:]).backward()
    assert sae.dictionary.grad is not None and float(sae.dictionary.grad.abs().sum()) > 0


def test_iso_energy_loss_closed_form():
    zi = torch.tensor([[1.0, 0.0], [3.0, 2.0]])
    zt = torch.tensor([[1.0, 2.0], [1.0, 0.0]])
    e_i, e_t = [5.0, 2.0], [1.0, 2.0]  # mean of squares per atom
    expect = (abs(5 - 1) / (6 + 1e-5) + 0.0) / 2
    assert float(iso_energy_loss(zi, zt)) == pytest.approx(expect, rel=1e-6)
    assert e_i[1] == e_t[1]


def test_energy_report_on_hand_built_codes():
    # atom 0: image only; 1: text only; 2: equal; 3: dead; 4: mu = 0.96 (image); 5: mu = 0.5 exactly
    zi = torch.tensor([[2.0, 0.0, 1.0, 0.0, math.sqrt(24), 1.0], [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]])
    zt = torch.tensor([[0.0, 3.0, 1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0, 0.0, 1.0]])
    rep = energies_from_codes(zi, zt, eps=0.05)
    torch.testing.assert_close(rep.e_img, torch.tensor([2.0, 0.0, 1.0, 0.0, 12.0, 1.0]))
    torch.testing.assert_close(rep.e_txt, torch.tensor([0.0, 5.0, 1.0, 0.0, 0.5, 1.0]))
    assert rep.mu[0] == 1.0 and rep.mu[1] == 0.0 and rep.mu[2] == 0.5 and math.isnan(float(rep.mu[3]))
    assert float(rep.mu[4]) == pytest.approx(0.96)
    assert [("dead", "bimodal", "image", "text")[i] for i in rep.labels.tolist()] == [
        "image", "text", "bimodal", "dead", "image", "bimodal",
    ]  # fmt: skip
    total = 2 + 5 + 2 + 12.5 + 2
    assert rep.fractions["image"] == pytest.approx(14.5 / total)
    assert rep.fractions["text"] == pytest.approx(5 / total)
    assert rep.counts == {"dead": 1, "bimodal": 2, "image": 2, "text": 1}


def test_restrict_parts_sum_to_all():
    toy = IsoEnergyToy(d=16, n_shared=6, n_image=3, n_text=3, seed=1)
    img, txt = toy.sample(200, seed=0)
    sae = MatchingPursuitSAE(16, 48, k=4, seed=0).eval()
    from iclr26_isoenergy import energy_report

    rep = energy_report(sae, img, txt)
    assert rep.counts["bimodal"] > 0 and rep.counts["image"] + rep.counts["text"] > 0
    for emb in (img, txt):
        total = restrict(sae, emb, rep, "bimodal") + restrict(sae, emb, rep, "unimodal")
        torch.testing.assert_close(total, restrict(sae, emb, rep, "all"), atol=1e-6, rtol=0)
        uni = restrict(sae, emb, rep, "image") + restrict(sae, emb, rep, "text")
        torch.testing.assert_close(uni, restrict(sae, emb, rep, "unimodal"), atol=1e-6, rtol=0)


def test_dim_closed_form_for_shifted_gaussians():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(500, 6, generator=g, dtype=torch.float64)
    shift = torch.tensor([3.0, -1.0, 0.0, 0.5, 0.0, 2.0], dtype=torch.float64)
    # the same cloud shifted: the difference in means is exactly the shift
    assert modality_gap(base + shift, base, "dim") == pytest.approx(float(shift.norm()), rel=1e-6)


def test_wasserstein_pot_equals_assignment_brute_force():
    ot = pytest.importorskip("ot")  # a peer: in the dev group
    from scipy.optimize import linear_sum_assignment

    g = torch.Generator().manual_seed(0)
    a = torch.randn(50, 5, generator=g, dtype=torch.float64)
    b = torch.randn(50, 5, generator=g, dtype=torch.float64) + 0.3
    an = a / a.norm(dim=1, keepdim=True)
    bn = b / b.norm(dim=1, keepdim=True)
    cost = (1 - an @ bn.T).numpy()
    r, c = linear_sum_assignment(cost)
    w = np.full(50, 1 / 50)
    assert float((ot.emd(w, w, cost, numItermax=10**8) * cost).sum()) == pytest.approx(
        float(cost[r, c].mean())
    )
    assert wasserstein_cosine(a, b, "pot") == pytest.approx(float(cost[r, c].mean()), abs=1e-9)
    assert wasserstein_cosine(a, b, "scipy") == pytest.approx(float(cost[r, c].mean()), abs=1e-9)


def test_wasserstein_equals_permutation_brute_force():
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)
    cos = (
        torch.nn.functional.normalize(a.double(), dim=1) @ torch.nn.functional.normalize(b.double(), dim=1).T
    )
    best = min(sum(1 - float(cos[i, p[i]]) for i in range(6)) / 6 for p in itertools.permutations(range(6)))
    assert wasserstein_cosine(a, b) == pytest.approx(best, abs=1e-12)


def test_wasserstein_subsamples_come_from_their_own_tensors():
    # images all point along e0, texts along e1: any correct subsample gives cost exactly 1; a text subsample
    # drawn from the image tensor (the official bug) would give 0
    img = torch.zeros(300, 4)
    img[:, 0] = 1.0
    txt = torch.zeros(300, 4)
    txt[:, 1] = 1.0
    img += 0.01 * torch.randn(300, 4, generator=torch.Generator().manual_seed(0)).abs()
    assert modality_gap(img, txt, "wasserstein", n=50) > 0.9
    assert modality_gap(img, img.clone(), "wasserstein", n=300) == pytest.approx(0.0, abs=1e-9)


def test_recall_at_1_identity_chance_and_brute_force():
    g = torch.Generator().manual_seed(0)
    img = torch.randn(1024, 32, generator=g)
    assert recall_at_1(img, img.clone()) == 1.0
    rnd = recall_at_1(img, torch.randn(1024, 32, generator=g))
    assert rnd <= 0.02
    # brute force: the same batches, one query at a time in numpy
    txt = img + 0.8 * torch.randn(1024, 32, generator=g)
    a = img.double().numpy()
    b = txt.double().numpy()
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    perm = torch.randperm(1024, generator=torch.Generator().manual_seed(5)).tolist()
    hits = 0
    for start in range(0, 1024, 256):
        idx = perm[start : start + 256]
        for i in range(256):
            hits += int(np.argmax(b[idx] @ a[idx[i]]) == i)  # image i -> texts of the batch
            hits += int(np.argmax(a[idx] @ b[idx[i]]) == i)  # text i -> images of the batch
    assert recall_at_1(img, txt, seed=5) == pytest.approx(hits / (2 * 1024))


def test_one_cycle_matches_torch():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=97, cycle_momentum=False)
    for step in range(97):
        assert opt.param_groups[0]["lr"] == pytest.approx(2e-3 * one_cycle(step, 97), rel=1e-9, abs=1e-15)
        opt.step()
        sched.step()


def test_recovery_metrics_by_hand():
    true = torch.eye(3, 4, dtype=torch.float64)
    learned = torch.tensor(
        [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0, 0]]
    )
    # matching: e0->row1 (cos 1), e1->row0 (cos 1), e2->row2 (cos 1/sqrt2)
    assert dictionary_distance(true, learned) == pytest.approx((1 - 1 / math.sqrt(2)) / 3)
    assert max_cosine_agreement(true, learned) == pytest.approx((2 + 1 / math.sqrt(2)) / 3)
    shared = torch.tensor([[1.0, 0.0, 0, 0], [0.0, 0.0, 1.0, 0]])
    text = torch.tensor([[0.9, 0.1, 0, 0], [0.0, 0.0, 0.0, 1.0]])
    labels = torch.tensor([1, 1, 1, 2])
    # concept 0: both views best match row 1 (bimodal) -> merged; concept 1: S -> row 2, T -> row 2 -> merged
    assert merged_rate(learned, shared, text, labels) == 1.0
    assert merged_rate(learned, shared, text, torch.tensor([1, 2, 1, 1])) == 0.5  # row 1 is image-unimodal


def test_toy_energy_balance():
    toy = IsoEnergyToy(seed=123)
    _, _, codes = toy.sample(20000, seed=0, return_codes=True)
    # α = 1: before the L2 normalisation every shared concept has the same coefficients, so equal energy
    torch.testing.assert_close(codes["raw_text"], codes["raw_image"], atol=0, rtol=0)
    e_i, e_t = (codes["shared_image"] ** 2).mean(0), (codes["shared_text"] ** 2).mean(0)
    assert 0.95 <= float(e_t.sum() / e_i.sum()) <= 1.05  # and about equal after it
    mild = IsoEnergyToy(seed=123, text_amplitude=0.3)
    _, _, codes = mild.sample(20000, seed=0, return_codes=True)
    raw = float((codes["raw_text"] ** 2).mean() / (codes["raw_image"] ** 2).mean())
    assert raw == pytest.approx(0.09, rel=1e-5)
    ratio = float((codes["shared_text"] ** 2).mean() / (codes["shared_image"] ** 2).mean())
    assert 0.15 <= ratio <= 0.25  # α² = 0.09 before the L2 normalisation; ≈ 0.20 after
    img, txt = mild.sample(10, seed=1)
    torch.testing.assert_close(img.norm(dim=1), torch.ones(10))
    torch.testing.assert_close(txt.norm(dim=1), torch.ones(10))
    rot = IsoEnergyToy(rotation_deg=45.0)
    cos = (rot.atoms["shared"] * rot.atoms["text_shared"]).sum(1)
    torch.testing.assert_close(cos, torch.full_like(cos, math.cos(math.pi / 4)), atol=1e-6, rtol=0)
