"""The maths against independent computations: hand-written loops, closed forms, brute force."""

import itertools
import math

import pytest
import torch

from iclr26_gba import (
    GBAError,
    GroupBiasAdaptation,
    SparseFeatureModel,
    TiedSAE,
    TopKSAE,
    ba_update,
    cross_seed_consistency,
    hungarian_mcc,
    recovery_metrics,
    sae_metrics,
    taf_grid,
    train_sae,
)


# ------------------------------------------------------------------------------------------ bias adaptation
def naive_ba(b, p, r, target, groups, gm, gp, eps):
    """Algorithm 1 (with the min/max clip that keeps b in [-1, 0]) as a plain loop."""
    b, p, r, target, groups = (t.tolist() for t in (b, p, r, target, groups))
    out = list(b)
    for m in range(len(b)):
        if p[m] > target[m]:
            out[m] = max(b[m] - gm * r[m], -1.0)
        elif p[m] < eps:
            firing_g = [r[j] for j in range(len(b)) if groups[j] == groups[m] and p[j] >= eps]
            firing = [r[j] for j in range(len(b)) if p[j] >= eps]
            rbar = (
                sum(firing_g) / len(firing_g) if firing_g else (sum(firing) / len(firing) if firing else 1.0)
            )
            out[m] = min(b[m] + gp * rbar, 0.0)
    return torch.tensor(out, dtype=torch.float64)


def test_ba_update_matches_hand_written_loop():
    g = torch.Generator().manual_seed(0)
    m = 40
    b = -torch.rand(m, generator=g, dtype=torch.float64)
    p = torch.rand(m, generator=g, dtype=torch.float64) * 0.3
    p[::4] = 0.0  # dead neurons
    r = torch.where(
        p > 0, torch.rand(m, generator=g, dtype=torch.float64) * 2, torch.zeros(m, dtype=torch.float64)
    )
    groups = torch.arange(m) % 3
    targets = torch.tensor([0.2, 0.05, 0.01], dtype=torch.float64)[groups]
    new, lowered, raised = ba_update(b, p, r, targets, groups, 0.03, 0.05, 1e-6)
    torch.testing.assert_close(new, naive_ba(b, p, r, targets, groups, 0.03, 0.05, 1e-6))
    assert bool(((new >= -1) & (new <= 0)).all())
    assert int(lowered.sum()) > 0 and int(raised.sum()) > 0


def test_ba_update_exact_moves_and_clips():
    groups = torch.tensor([0, 0, 0, 1, 1])
    targets = torch.tensor([0.1, 0.1, 0.1, 0.1, 0.1], dtype=torch.float64)
    b = torch.tensor([-0.5, -0.2, -0.3, -0.998, -0.001], dtype=torch.float64)
    p = torch.tensor([0.5, 0.05, 0.0, 0.9, 0.0], dtype=torch.float64)
    r = torch.tensor([0.8, 0.4, 0.0, 0.7, 0.0], dtype=torch.float64)
    new, _, _ = ba_update(b, p, r, targets, groups, gamma_minus=0.01, gamma_plus=0.02, eps=1e-6)
    assert new[0] == pytest.approx(-0.5 - 0.01 * 0.8)  # over-firing: drops by exactly γ₋·r
    assert new[1] == pytest.approx(-0.2)  # in band: unchanged
    assert new[2] == pytest.approx(-0.3 + 0.02 * (0.8 + 0.4) / 2)  # dead: rises by γ₊·r̄ of its group
    assert new[3] == pytest.approx(-1.0)  # clipped at −1
    assert new[4] == pytest.approx(0.0)  # clipped at 0 (group 1's firing mean is 0.7)
    # the whole group silent → global mean; nothing firing at all → 1
    new2, _, _ = ba_update(
        torch.tensor([-0.5, -0.5]),
        torch.zeros(2),
        torch.zeros(2),
        torch.full((2,), 0.1, dtype=torch.float64),
        torch.tensor([0, 1]),
        0.01,
        0.1,
        1e-6,
    )
    torch.testing.assert_close(new2, torch.tensor([-0.4, -0.4]))


def test_taf_grid():
    t = taf_grid(10, 0.5, 1e-3)
    assert t[0] == pytest.approx(0.5) and t[-1] == pytest.approx(1e-3)
    ratios = t[1:] / t[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, (1e-3 / 0.5) ** (1 / 9)))
    assert taf_grid(1, 0.05, 0.5).tolist() == [0.05]  # K = 1: [HTF], LTF ignored
    torch.testing.assert_close(
        taf_grid(3, 0.5, 0.1, "linear"), torch.tensor([0.5, 0.3, 0.1], dtype=torch.float64)
    )
    with pytest.raises(GBAError, match="htf must be greater than ltf"):
        taf_grid(4, 0.01, 0.1)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(GBAError, match=r"must be in \(0, 1\]"):
            taf_grid(4, bad, 1e-3) if bad != 0.0 else taf_grid(4, 0.5, bad)


def test_groups_are_near_equal_random_split():
    gba = GroupBiasAdaptation(103, n_groups=10, seed=3)
    counts = torch.bincount(gba.groups, minlength=10)
    assert int(counts.max() - counts.min()) <= 1 and int(counts.sum()) == 103
    assert gba.groups.tolist() != sorted(gba.groups.tolist())
    torch.testing.assert_close(gba.targets, gba.taf[gba.groups])
    with pytest.raises(GBAError, match="at least n_groups"):
        GroupBiasAdaptation(5, n_groups=10)


def test_frequency_control_without_training_matches_closed_form():
    """W fixed, x ~ N(0, σ²I): y_m ~ N(b_m, σ²‖w_m‖²), so P(y_m > 0) = 1 − Φ(−b_m/σ_m)."""
    torch.manual_seed(0)
    d, m, sigma = 16, 60, 0.3
    sae = TiedSAE(d, m, seed=0)
    gba = GroupBiasAdaptation(m, n_groups=3, htf=0.2, ltf=0.02, every=1, seed=0)
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        gba.observe(sae.pre_activations(sigma * torch.randn(512, d, generator=g)))
        gba.update(sae)
    x = sigma * torch.randn(50_000, d, generator=g)
    emp = (sae.pre_activations(x) > 0).double().mean(0)
    closed = 0.5 * (
        1 + torch.erf((sae.b.double() / (sigma * sae.W.detach().norm(dim=1).double())) / math.sqrt(2))
    )
    torch.testing.assert_close(emp, closed, atol=0.01, rtol=0.1)
    for k in range(3):
        f = float(emp[gba.groups == k].mean())
        assert gba.taf[k] / 2 <= f <= gba.taf[k] * 2, (k, f, float(gba.taf[k]))
    assert bool(((sae.b >= -1) & (sae.b <= 0)).all())


def test_bias_gets_no_gradient_and_pre_bias_is_frozen():
    model = SparseFeatureModel(16, 8, 2, seed=0)
    res = train_sae(
        model, method="gba", n_neurons=20, steps=30, batch_size=64, n_groups=2, htf=0.3, ltf=0.05, every=5
    )
    sae = res.sae
    names = dict(sae.named_parameters())
    assert set(names) == {"W", "a"}
    assert not sae.b.requires_grad and sae.b.grad is None
    assert not sae.b_pre.requires_grad
    in_opt = {id(p) for grp in res.optimizer.param_groups for p in grp["params"]}
    assert id(sae.b) not in in_opt and id(sae.b_pre) not in in_opt
    assert float(sae.b.abs().sum()) > 0  # bias adaptation did move it
    torch.testing.assert_close(sae.W.detach().norm(dim=1), torch.ones(20))
    learn = train_sae(
        model,
        method="gba",
        n_neurons=20,
        steps=2,
        batch_size=64,
        n_groups=2,
        htf=0.3,
        ltf=0.05,
        learn_pre_bias=True,
    )
    assert "b_pre" in dict(learn.sae.named_parameters())


# ------------------------------------------------------------------------------------------ the SAEs
def test_tied_sae_equations_against_a_row_loop():
    sae = TiedSAE(5, 7, seed=1)
    with torch.no_grad():
        sae.b.copy_(-0.1 * torch.arange(7.0))
        sae.b_pre.copy_(torch.linspace(-0.2, 0.2, 5))
        sae.a.copy_(torch.linspace(0.5, 1.5, 7))
        sae.input_scale.fill_(0.5)
    x = torch.randn(4, 5)
    x_hat, z = sae(x)
    W, a, b, bp = sae.W.detach(), sae.a.detach(), sae.b, sae.b_pre
    for i in range(4):
        xs = 0.5 * x[i]
        zi = torch.tensor([max(0.0, float((xs - bp) @ W[m] + b[m])) for m in range(7)])
        torch.testing.assert_close(z[i].detach(), zi)
        xh = sum(zi[m] * a[m] * W[m] for m in range(7)) + bp
        torch.testing.assert_close(x_hat[i].detach(), xh / 0.5)
    jump = TiedSAE(5, 7, activation="jumprelu", seed=1)
    jump.load_state_dict(sae.state_dict())
    u = (0.5 * x - bp) @ W.T
    torch.testing.assert_close(jump.encode(x).detach(), u * ((u + b) > 0))


def test_topk_sae_keeps_k_and_unit_decoder():
    model = SparseFeatureModel(16, 8, 2, seed=0)
    res = train_sae(model, method="topk", k=3, n_neurons=24, steps=20, batch_size=64)
    z = res.sae.encode(model.sample(100)[0])
    assert int((z > 0).sum(1).max()) <= 3
    torch.testing.assert_close(res.sae.W_dec.detach().norm(dim=1), torch.ones(24))


def test_quantile_init_starts_neurons_at_their_target():
    model = SparseFeatureModel(32, 16, 4, seed=0)
    x = model.sample(8192)[0]
    res = train_sae(
        x,
        method="gba",
        n_neurons=40,
        steps=1,
        batch_size=8192,
        lr=1e-9,
        n_groups=2,
        htf=0.3,
        ltf=0.1,
        bias_init="quantile",
    )
    freq = (res.sae.pre_activations(x) > 0).double().mean(0)
    torch.testing.assert_close(freq, res.adaptation.targets, atol=0.02, rtol=0.0)


# ------------------------------------------------------------------------------------------ metrics
def test_recovery_metrics_perfect_and_missing_row():
    model = SparseFeatureModel(12, 20, 2, seed=0)
    v = model.features
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    scaled = v[perm] * torch.linspace(0.5, 3, 12).unsqueeze(1)
    padded = torch.cat([scaled, torch.randn(30, 20, generator=torch.Generator().manual_seed(2))])
    m = recovery_metrics(padded, v)
    assert m["frr@0.8"] == 1.0 and m["frr@0.9"] == 1.0 and m["mcc"] == pytest.approx(1.0)
    m2 = recovery_metrics(v[1:], v)
    assert m2["frr@0.9"] == pytest.approx(11 / 12)


def test_hungarian_mcc_equals_brute_force():
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    an = a / a.norm(dim=1, keepdim=True)
    bn = b / b.norm(dim=1, keepdim=True)
    c = (bn @ an.T).double()  # [true, learned]
    brute = max(sum(float(c[i, p[i]]) for i in range(5)) / 5 for p in itertools.permutations(range(5)))
    assert hungarian_mcc(a, b) == pytest.approx(brute)


def test_sae_metrics_against_direct_formulas():
    model = SparseFeatureModel(16, 8, 2, seed=0)
    sae = TiedSAE(8, 12, seed=0)
    x = model.sample(300)[0]
    sae.set_input_stats(x)
    with torch.no_grad():
        sae.b.fill_(-0.3)
    m = sae_metrics(sae, x, batch_size=64)
    with torch.no_grad():
        x_hat, z = sae(x)
    fvu = float(((x - x_hat) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())
    assert m["fvu"] == pytest.approx(fvu, rel=1e-4)
    assert m["l0"] == pytest.approx(float((z > 0).sum(1).double().mean()))
    torch.testing.assert_close(m["firing_frequency"], (z > 0).double().mean(0))
    assert m["dead_fraction"] == pytest.approx(float(((z > 0).sum(0) == 0).double().mean()))


def test_cross_seed_consistency():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(10, 6, generator=g)
    assert cross_seed_consistency(a, a * 2.0) == 1.0
    b = torch.cat([a[:4], -a[4:]])  # 6 directions flipped
    assert cross_seed_consistency(a, b, tau=0.9) == pytest.approx(0.4, abs=0.1)
    freqs = torch.tensor([0.5, 0.4, 0.3, 0.2, 0.0, 0.0, 0.01, 0.02, 0.03, 0.04])
    # alive = 8 neurons; top 50% by frequency = neurons 0..3, all of which are in b unflipped
    assert cross_seed_consistency(a, b, freqs_a=freqs, top_alpha=0.5) == 1.0
    with pytest.raises(GBAError):
        cross_seed_consistency(a, b, top_alpha=0.5)


# ------------------------------------------------------------------------------------------ the toy model
def test_sparse_feature_model_statistics():
    model = SparseFeatureModel(40, 30, 4, seed=0)
    torch.testing.assert_close(model.features.norm(dim=1), torch.ones(40))
    x, h = model.sample(20_000)
    assert bool(((h > 0).sum(1) == 4).all())
    assert float(h[h > 0].min()) >= 0.5 and float(h.max()) <= 1.5
    torch.testing.assert_close(x, h @ model.features)
    f = 4 / 40
    sd = math.sqrt(f * (1 - f) / 20_000)
    assert bool(((h > 0).double().mean(0) - f).abs().max() <= 3 * sd * 1.5)  # 3σ (×1.5: max over 40 features)
    mix = SparseFeatureModel(64, 32, {2: 0.5, 8: 0.5}, seed=1)
    _, h = mix.sample(20_000)
    counts = (h > 0).sum(1)
    assert set(counts.unique().tolist()) == {2, 8}
    assert float((counts == 2).double().mean()) == pytest.approx(0.5, abs=3 * math.sqrt(0.25 / 20_000))
    f = 5 / 64
    assert float(mix.frequencies[0]) == pytest.approx(f)
    assert abs(float((h > 0).double().mean()) - f) <= 3 * math.sqrt(f * (1 - f) / (20_000 * 64))
    a1, _ = SparseFeatureModel(8, 4, 2, seed=3).sample(5)
    a2, _ = SparseFeatureModel(8, 4, 2, seed=3).sample(5)
    torch.testing.assert_close(a1, a2)  # seeded stream


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        (dict(n_features=4, d=3, sparsity=5), "larger than n_features"),
        (dict(n_features=4, d=3, sparsity={1: 0.5, 2: 0.2}), "sum to 1"),
        (dict(n_features=4, d=3, sparsity=1, magnitude="cauchy"), "unknown magnitude"),
    ],
)
def test_sparse_feature_model_rejects_bad_settings(kwargs, msg):
    with pytest.raises(GBAError, match=msg):
        SparseFeatureModel(**kwargs)


def test_topk_sae_rejects_bad_k():
    with pytest.raises(GBAError, match="k must be"):
        TopKSAE(4, 3, k=5)


def test_gba_config_drives_training_like_keywords():
    from iclr26_gba import GBAConfig

    model = SparseFeatureModel(16, 8, 2, seed=0)
    cfg = GBAConfig(n_groups=3, htf=0.3, ltf=0.03, every=5)
    a = train_sae(model, n_neurons=12, steps=10, batch_size=32, gba_config=cfg)
    b = train_sae(model, n_neurons=12, steps=10, batch_size=32, n_groups=3, htf=0.3, ltf=0.03, every=5)
    torch.testing.assert_close(a.adaptation.targets, b.adaptation.targets)
    torch.testing.assert_close(a.sae.b, b.sae.b)
    with pytest.raises(GBAError, match="htf must be greater than ltf"):
        GBAConfig(htf=0.01, ltf=0.1)


def test_sae_init_is_independent_of_the_toy_with_the_same_seed():
    """Regression: with plain manual_seed(0) for both, the SAE started with the true features as rows."""
    model = SparseFeatureModel(64, 32, 2, seed=0)
    for sae in (TiedSAE(32, 256, seed=0), TopKSAE(32, 256, k=4, seed=0)):
        assert recovery_metrics(sae.decoder_directions(), model.features)["frr@0.8"] == 0.0
