"""The budget router: Lagrangian policy vs brute force, the budget, the greedy rule, τ bisection, save/load."""

from __future__ import annotations

import itertools

import pytest
import torch

from iclr26_bolt import Action, BudgetRouter
from iclr26_bolt.router import calibrate_threshold
from iclr26_core.errors import UserError

ACTS = [Action("HR", 0.5), Action("tmRAG", 0.3), Action("QD", 0.35)]


def with_gains(router: BudgetRouter, gains: torch.Tensor) -> BudgetRouter:
    """A router whose gains are exactly ``gains`` for features = logit(gains) on a diagonal model."""
    router.columns = list(range(len(router.actions)))
    router.mean, router.scale = torch.zeros(len(router.actions)), torch.ones(len(router.actions))
    router.w = torch.eye(len(router.actions))
    router.b = torch.zeros(len(router.actions))
    router.fitted = True
    return router


def feats(g: torch.Tensor) -> torch.Tensor:
    return torch.logit(g)


def brute_force(g: list[float], costs: list[float], tau: float, spare: float) -> set[int]:
    best, best_v = set(), 0.0
    for r in range(1, len(g) + 1):
        for sub in itertools.combinations(range(len(g)), r):
            if sum(costs[j] for j in sub) <= spare + 1e-9:
                v = sum(g[j] - tau * costs[j] for j in sub)
                if v > best_v + 1e-12:
                    best, best_v = set(sub), v
    return best


def test_lagrangian_equals_brute_force_where_exact():
    gen = torch.Generator().manual_seed(0)
    g = torch.rand(200, 3, generator=gen) * 0.9 + 0.05
    router = with_gains(BudgetRouter(ACTS, budget=3.0), g)  # B - 1 = 2 >= 1.15: the budget never binds
    for tau in (0.0, 0.3, 0.8, 1.5):
        dec = router.decide(feats(g), tau)
        for i in range(len(g)):
            ref = brute_force(g[i].tolist(), [a.cost for a in ACTS], tau, 2.0)
            assert {router.names.index(a) for a in dec[i]} == ref


def test_budget_never_exceeded_and_order():
    g = torch.rand(300, 3, generator=torch.Generator().manual_seed(1))
    for budget in (1.0, 1.4, 1.7, 2.0):
        router = with_gains(BudgetRouter(ACTS, budget=budget), g)
        dec = router.decide(feats(g), 0.0)
        assert float(router.extra_cost(dec).max()) <= budget - 1.0 + 1e-9
    router = with_gains(BudgetRouter(ACTS, budget=2.0), g)
    for d, row in zip(router.decide(feats(g), 0.0), g, strict=True):
        u = {a.name: float(row[j]) / a.cost for j, a in enumerate(ACTS)}
        assert [u[a] for a in d] == sorted((u[a] for a in d), reverse=True)


def test_greedy_official_rule_hand_cases():
    r = with_gains(BudgetRouter(ACTS, budget=2.0, policy="greedy"), torch.zeros(1, 3))
    # u = g / C: HR 0.9/0.5 = 1.8, tmRAG 0.3/0.3 = 1.0, QD 0.7/0.35 = 2.0 -> QD, then HR (two rounds)
    g = torch.tensor([[0.9, 0.3, 0.7]])
    assert r.decide(feats(g), 0.5) == [["QD", "HR"]]
    assert r.decide(feats(g), 1.9) == [["QD"]]  # HR's u = 1.8 < tau stops the second round
    assert r.decide(feats(g), 2.5) == [[]]
    # refreshed features after QD make every gain tiny: the second round stops
    tiny = feats(torch.tensor([0.01, 0.01, 0.01]))
    assert r.decide(feats(g), 0.5, refresh=lambda i, a: tiny) == [["QD"]]
    # budget 1.6: after HR (0.5) nothing else fits in the remaining 0.1
    r2 = with_gains(BudgetRouter(ACTS, budget=1.6, policy="greedy"), torch.zeros(1, 3))
    assert r2.decide(feats(torch.tensor([[0.99, 0.2, 0.3]])), 0.1) == [["HR"]]
    # budget 1.6: tmRAG first (u = 3); then QD (0.35) or HR (0.5) would pass 0.6
    r3 = with_gains(BudgetRouter(ACTS, budget=1.6, policy="greedy"), torch.zeros(1, 3))
    assert r3.decide(feats(torch.tensor([[0.5, 0.9, 0.6]])), 0.1) == [["tmRAG"]]  # 0.3 + 0.35 > 0.6


@pytest.mark.parametrize("target", [0.1, 0.25, 0.5, 0.75])
def test_tau_bisection_reaches_target(target):
    g = torch.rand(2000, 3, generator=torch.Generator().manual_seed(2))
    router = with_gains(BudgetRouter(ACTS, budget=2.0), g)
    router.tune(feats(g), target)
    assert abs(float(router.extra_cost(router.decide(feats(g))).mean()) - target) <= 0.02


def test_fit_save_load_roundtrip(tmp_path):
    gen = torch.Generator().manual_seed(3)
    f = torch.rand(300, 5, generator=gen)
    labels = (torch.rand(300, 3, generator=gen) < f[:, 2:3]).float()
    router = BudgetRouter(ACTS, budget=2.0).fit(f, labels)
    router.tune(f, 0.4)
    router.save(tmp_path)
    back = BudgetRouter.load(tmp_path)
    assert torch.equal(back.gains(f), router.gains(f)) and back.tau == router.tau
    assert back.decide(f) == router.decide(f)
    # the HR gain follows the entropy column it was fitted on
    assert float(router.w[0, 2]) > 0


def test_gain_models_fitted_to_convergence_match_sklearn():
    """The default fit (standardised features, Newton to convergence) equals scikit-learn's logistic
    regression with the same ridge (C = 1 / (ridge * N), bias unpenalised)."""
    from sklearn.linear_model import LogisticRegression

    gen = torch.Generator().manual_seed(4)
    f = torch.rand(800, 5, generator=gen) * torch.tensor([1.0, 0.2, 3.0, 0.5, 1.0])
    p_true = torch.sigmoid(-3.0 + 2.0 * f[:, 2:3] - 4.0 * f[:, :1])
    labels = (torch.rand(800, 3, generator=gen) < p_true).float()
    router = BudgetRouter(ACTS, budget=2.0).fit(f, labels)
    x = f[:, :4].double().numpy()
    z = (x - x.mean(0)) / x.std(0, ddof=1)
    for j in range(3):
        ref = LogisticRegression(C=1.0 / (1e-4 * len(z)), tol=1e-10, max_iter=10_000).fit(
            z, labels[:, j].numpy()
        )
        want = torch.from_numpy(ref.predict_proba(z)[:, 1])
        assert torch.allclose(router.gains(f)[:, j].double(), want, atol=1e-4)
    # mean predicted gain = base rate at the optimum (the score equation of the bias); the official fit is off
    assert torch.allclose(router.gains(f).mean(0), labels.mean(0), atol=1e-4)
    official = BudgetRouter(ACTS, budget=2.0, solver="adamw").fit(f, labels)
    assert float((official.gains(f).mean(0) - labels.mean(0)).abs().max()) > 0.02


def test_warns_when_no_action_ever_fixes_pass1():
    f = torch.rand(200, 5, generator=torch.Generator().manual_seed(5))
    with pytest.warns(UserWarning, match="no action ever fixes pass-1"):
        router = BudgetRouter(ACTS, budget=2.0).fit(f, torch.zeros(200, 3))
    assert float(router.gains(f).max()) == 0.0
    assert router.decide(f, 0.0) == [[] for _ in range(200)]  # zero gain never pays, even at tau = 0
    with pytest.warns(UserWarning, match="is not reached"):
        router.tune(f, 0.5)
    assert float(router.extra_cost(router.decide(f)).max()) == 0.0
    labels = torch.zeros(200, 3)
    labels[:40, 0] = 1.0
    with pytest.warns(UserWarning, match=r"\['tmRAG', 'QD'\] never fix pass-1"):
        router = BudgetRouter(ACTS, budget=2.0).fit(f, labels)
    assert {a for d in router.decide(f, 0.0) for a in d} == {"HR"}


def test_single_threshold_calibration():
    v = torch.arange(1000.0)
    assert float((v >= calibrate_threshold(v, 0.3)).float().mean()) == pytest.approx(0.3, abs=0.002)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget": 0.5}, "budget must be >= 1.0"),
        ({"actions": ["HR", "ZOOM"]}, "unknown action 'ZOOM'"),
        ({"policy": "best"}, "unknown policy"),
        ({"features": ["p_max", "luck"]}, "unknown router features"),
    ],
)
def test_bad_router_arguments(kwargs, message):
    with pytest.raises(UserError, match=message):
        BudgetRouter(**kwargs)
