"""Sweeps, and (p, t, c) estimated from real solvers: the digits demo and tiny transformers models."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_core.errors import UserError
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_routing_game import (
    RoutingGame,
    digits_solvers,
    estimate_params,
    generated_tasks,
    hf_solver,
    sweep,
)


def test_sweep_grid_matches_single_games():
    base = RoutingGame(p1=0.4, p2=0.8, t1=1, t2=3, c1=1, c2=3, V=5, P=2)
    df = sweep(base, "t1", "P", [0.5, 1.0, 4.0], [0.0, 3.0])
    assert len(df) == 6
    for _, row in df.iterrows():
        eq = base.replace(t1=row["t1"], P=row["P"]).provider_optimum()
        assert (row["i"], row["s"]) == (eq.i, eq.s)
        assert row["provider_cost"] == pytest.approx(eq.provider_cost, rel=1e-12)
        assert row["gap"] == pytest.approx(eq.gap, abs=1e-12)
    with pytest.raises(UserError, match="unknown sweep axis 'W'"):
        sweep(base, "W", "P", [1], [1])
    with pytest.raises(UserError, match="p1 must be in"):
        sweep(base, "p1", "P", [0.5, 1.5], [1])


def test_digits_demo_estimate():
    tasks, solvers = digits_solvers(0, n_test=60, ensemble=1, hidden=16)
    est = estimate_params(solvers, tasks, value=5.0, time_value=1000.0, churn_penalty=1.0, flops_unit=1e5)
    for m in est["models"]:
        assert 0 <= m["accuracy"] <= 1 and 0 < m["p"] <= 1 and m["t"] > 0 and m["c"] > 0
    assert est["models"][0]["c"] == pytest.approx(2 * 16 * 10 / 1e5)  # logistic regression on 16 pixels
    assert est["models"][1]["c"] == pytest.approx(2 * (64 * 16 + 16 * 10) / 1e5)
    assert est["solution"]["equilibrium"]["i"] in (1, 2) and est["n_tasks"] == 60


def test_hf_solver_on_tiny_gpt2s_counts_flops():
    tok = train_bpe(300)
    small = tiny_model("gpt2", "tiny", vocab_size=300)
    large = tiny_model("gpt2", "small", vocab_size=300)
    tasks = generated_tasks(6, seed=1)
    solvers = [hf_solver(small, tok, "a"), hf_solver(large, tok, "b")]
    est = estimate_params(solvers, tasks, value=5.0, time_value=10.0, flops_unit=1e6)
    n_tokens = sum(
        len(tok(t["question"])["input_ids"]) * len(t["choices"])
        + sum(len(tok(c)["input_ids"]) for c in t["choices"])
        for t in tasks
    )
    for solver, m in zip(solvers, est["models"]):
        n_params = sum(p.numel() for p in solver.model.parameters())
        assert m["flops_per_call"] == pytest.approx(2 * n_params * n_tokens / len(tasks))
        assert m["c"] == pytest.approx(m["flops_per_call"] / 1e6)
        assert 0 <= m["accuracy"] <= 1 and m["t"] > 0
    assert est["models"][1]["c"] > est["models"][0]["c"]  # the larger model costs more per call
    assert set(est["by_type"]) == {"add", "multiply"}
    assert sum(v["n"] for v in est["by_type"].values()) == 6


def test_estimate_bad_input():
    tasks = generated_tasks(3)
    with pytest.raises(UserError, match="exactly two solvers"):
        estimate_params([lambda t: 0], tasks, value=1.0)
    with pytest.raises(UserError, match="no flops_per_call"):
        estimate_params([lambda t: 0, lambda t: 1], tasks, value=1.0)
    with pytest.raises(UserError, match="V must be > 0"):
        estimate_params([lambda t: 0, lambda t: 1], tasks, value=0.0, cost_per_call=[1, 2])
    est = estimate_params([lambda t: 0, lambda t: 1], tasks, value=1.0, cost_per_call=[1, 2])
    assert np.isclose(est["models"][0]["c"], 1.0)
