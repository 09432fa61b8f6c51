"""bTTA on one seed: gain models fitted on validation logs, τ tuned to target extra costs, evaluated on test
against random triggering at the same realised cost, entropy-only and RouteLLM-style single-threshold routers,
always-on subsets, a per-feature ablation and the accuracy–cost frontier."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .features import router_features
from .metrics import decision_metrics, flip_rate, ocw
from .router import ROUTER_FEATURES, Action, BudgetRouter, calibrate_threshold
from .routing import (
    ACTIONS,
    SUBSETS,
    Candidates,
    Outcomes,
    build_candidates,
    calibrate,
    ladder,
    mask_of,
    memory_of,
    outcomes,
    random_assignment,
    subsets_table,
)


def _router(
    cfg: Any,
    seed: int,
    features: tuple[str, ...] = ROUTER_FEATURES,
    policy: str | None = None,
    solver: str | None = None,
):
    costs = dict(cfg.route.costs)
    return BudgetRouter(
        [Action(a, float(costs[a])) for a in ACTIONS],
        budget=float(cfg.route.budget),
        policy=policy or str(cfg.route.policy),
        features=features,
        solver=str(solver or cfg.route.gain_solver),
        epochs=int(cfg.route.gain_epochs),
        lr=float(cfg.route.gain_lr),
        seed=seed,
    )


def _masks(decisions: list[list[str]]) -> np.ndarray:
    return np.array([mask_of(d) for d in decisions], dtype=np.int64)


def _refresh(c: Candidates):
    """Greedy policy: the features after an action, from that action's distribution (ρ unchanged)."""
    rho = torch.from_numpy(c.rho)
    after = {
        a: router_features(torch.from_numpy(p), rho, None)
        for a, p in (("HR", c.hr), ("tmRAG", c.rag), ("QD", c.qd))
    }

    def fn(i: int, action: str) -> torch.Tensor:
        return after[action][i]

    return fn


def single_threshold(
    signal_val: np.ndarray, signal_test: np.ndarray, target: float, costs: dict[str, float], budget: float
) -> tuple[np.ndarray, tuple[str, ...], float]:
    """RouteLLM-style: route the share target/C(bundle) of validation items with the highest signal."""
    bundle = ladder(target, costs, budget)
    bcost = sum(costs[a] for a in bundle)
    thr = calibrate_threshold(signal_val, target / bcost)
    trig = signal_test >= thr
    return np.where(trig, mask_of(bundle), 0).astype(np.int64), bundle, float(trig.mean() * bcost)


def route_seed(data: Any, cfg: Any) -> dict[str, Any]:
    """Everything C4/C5 and the reference rows need from one seed."""
    costs = {a: float(cfg.route.costs[a]) for a in ACTIONS}
    budget = float(cfg.route.budget)
    tau_cal = calibrate(data)
    memory = memory_of(data)
    val = build_candidates(data, cfg, "val", tau_cal, memory)
    test = build_candidates(data, cfg, "test", tau_cal, memory)
    o_test = outcomes(test)
    f_val, f_test = val.features(), test.features()
    labels = val.gain_labels()
    router = _router(cfg, data.seed).fit(f_val, labels)
    # extra arm: the official code's fit (AdamW lr 1e-2, 80 epochs, raw features), the 0.1 headline
    official = _router(cfg, data.seed, solver="adamw").fit(f_val, labels)
    h_val, h_test = f_val[:, 2].numpy(), f_test[:, 2].numpy()
    g_val, g_test = router.gains(f_val)[:, 0].numpy(), router.gains(f_test)[:, 0].numpy()
    rows, per_item = [], {"random": [], "entropy": [], "routellm": [], "official_vs_entropy": []}
    p1_pred = test.p1.argmax(-1)
    for target in [float(t) for t in cfg.route.targets]:
        tau = router.tune(f_val, target)
        dec = router.decide(f_test)
        masks = _masks(dec)
        c_r, pmax_r, pred_r = o_test.of(masks)
        c_rand = random_assignment(o_test, masks)
        m_e, bundle, cost_e = single_threshold(h_val, h_test, target, costs, budget)
        m_g, _, cost_g = single_threshold(g_val, g_test, target, costs, budget)
        c_e, c_g = o_test.of(m_e)[0], o_test.of(m_g)[0]
        per_item["random"].append(c_r - c_rand)
        per_item["entropy"].append(c_r - c_e)
        per_item["routellm"].append(c_r - c_g)
        official.tune(f_val, target)
        dec_c = official.decide(f_test)
        c_c = o_test.of(_masks(dec_c))[0]
        per_item["official_vs_entropy"].append(c_c - c_e)
        routed = np.array([len(d) > 0 for d in dec])
        to_rag = np.array(["tmRAG" in d for d in dec])
        rows.append(
            {
                "target": target,
                "tau": tau,
                "val_cost": router.info["tuned_cost"],
                "router": {"acc": float(c_r.mean()), "cost": float(router.extra_cost(dec).mean())},
                "random": {"acc": float(c_rand.mean()), "cost": float(router.extra_cost(dec).mean())},
                "entropy": {"acc": float(c_e.mean()), "cost": cost_e, "bundle": "+".join(bundle)},
                "routellm": {"acc": float(c_g.mean()), "cost": cost_g, "bundle": "+".join(bundle)},
                "official": {
                    "acc": float(c_c.mean()),
                    "cost": float(official.extra_cost(dec_c).mean()),
                    "action_share": {a: float(np.mean([a in d for d in dec_c])) for a in ACTIONS},
                },
                "routed_share": float(routed.mean()),
                "action_share": {a: float(np.mean([a in d for d in dec])) for a in ACTIONS},
                "ocw_routed": ocw(pmax_r, c_r),
                "flip": flip_rate(p1_pred, pred_r),
                "rcr": float((~test.rag_majority_right[to_rag]).mean()) if to_rag.any() else float("nan"),
                "final_metrics": decision_metrics(o_test.probs[np.arange(len(masks)), masks], test.gold),
            }
        )
    mid = float(cfg.route.targets[len(cfg.route.targets) // 2])
    return {
        "tau_cal": tau_cal,
        "pass1": decision_metrics(test.p1, test.gold),
        "candidates_acc": {
            "pass1": float((test.p1.argmax(-1) == test.gold).mean()),
            "HR": float((test.hr.argmax(-1) == test.gold).mean()),
            "tmRAG": float((test.rag.argmax(-1) == test.gold).mean()),
            "QD": float((test.qd.argmax(-1) == test.gold).mean()),
        },
        "gain_label_rate": {a: float(labels[:, j].mean()) for j, a in enumerate(ACTIONS)},
        "mean_gain": {a: float(router.gains(f_val)[:, j].mean()) for j, a in enumerate(ACTIONS)},
        "mean_gain_official": {a: float(official.gains(f_val)[:, j].mean()) for j, a in enumerate(ACTIONS)},
        "candidates_ocw": {
            k: ocw(p.max(-1), p.argmax(-1) == test.gold)
            for k, p in (("pass1", test.p1), ("HR", test.hr), ("tmRAG", test.rag), ("QD", test.qd))
        },
        "gain_weights": {a: [*router.w[j].tolist(), float(router.b[j])] for j, a in enumerate(ACTIONS)},
        "rows": rows,
        "per_item": {k: np.mean(v, axis=0) for k, v in per_item.items()},
        "always_on": subsets_table(o_test, costs, budget),
        "ablation": ablation(cfg, data.seed, f_val, f_test, labels, o_test, mid),
        "greedy": greedy_row(cfg, data.seed, val, test, f_val, f_test, labels, o_test, mid),
        "frontier": frontier(router, f_test, o_test, h_val, h_test, costs, budget),
        "rho_mean": float(test.rho.mean()),
        "kappa_mean": float(test.kappa.mean()),
    }


def ablation(cfg, seed, f_val, f_test, labels, o_test: Outcomes, target: float) -> list[dict[str, Any]]:
    """Refit the router without each feature (reviewers' ask), same target cost."""
    rows = []
    for drop in (None, *ROUTER_FEATURES):
        feats = tuple(f for f in ROUTER_FEATURES if f != drop)
        r = _router(cfg, seed, feats).fit(f_val, labels)
        r.tune(f_val, target)
        dec = r.decide(f_test)
        c = o_test.of(_masks(dec))[0]
        rows.append(
            {"without": drop or "(none)", "acc": float(c.mean()), "cost": float(r.extra_cost(dec).mean())}
        )
    return rows


def greedy_row(cfg, seed, val, test, f_val, f_test, labels, o_test, target) -> dict[str, Any]:
    """The official greedy policy (≤ 2 rounds, features refreshed from each action's distribution)."""
    r = _router(cfg, seed, policy="greedy").fit(f_val, labels)
    r.tune(f_val, target, refresh=_refresh(val))
    dec = r.decide(f_test, refresh=_refresh(test))
    c = o_test.of(_masks(dec))[0]
    return {"target": target, "acc": float(c.mean()), "cost": float(r.extra_cost(dec).mean())}


def frontier(router, f_test, o_test: Outcomes, h_val, h_test, costs, budget) -> dict[str, Any]:
    """Accuracy against realised extra cost on test: router (τ sweep), random (same decisions), entropy-only."""
    out: dict[str, Any] = {"router": [], "random": [], "entropy": [], "always_on": []}
    for tau in np.linspace(0.0, 3.5, 36):
        dec = router.decide(f_test, float(tau))
        masks = _masks(dec)
        cost = float(router.extra_cost(dec).mean())
        out["router"].append((cost, float(o_test.of(masks)[0].mean())))
        out["random"].append((cost, float(random_assignment(o_test, masks).mean())))
    for target in np.linspace(0.0, 0.8, 17):
        m, _, cost = single_threshold(h_val, h_test, float(max(target, 1e-6)), costs, budget)
        out["entropy"].append((cost, float(o_test.of(m)[0].mean())))
    for m, subset in enumerate(SUBSETS):
        if subset:
            out["always_on"].append(
                ("+".join(subset), sum(costs[a] for a in subset), float(o_test.correct[:, m].mean()))
            )
    return out
