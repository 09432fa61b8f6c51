"""Sweeps, and (p, t, c) estimated from sampled i.i.d. retries: known rates, the digits demo, tiny LMs."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_core.errors import UserError
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import train_bpe
from iclr26_routing_game import (
    BernoulliSolver,
    RoutingGame,
    cloze_tasks,
    digits_solvers,
    estimate_params,
    generated_tasks,
    hf_solver,
    sweep,
)
from iclr26_routing_game.estimate import measure


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


def _tasks(n):
    return [{"id": k, "question": "q", "choices": ["a", "b"], "answer": 0} for k in range(n)]


def test_estimate_recovers_a_known_success_rate_with_coverage():
    """A solver that succeeds with probability 0.3 on every pass, by construction: p̂ is near 0.3, the interval
    covers 0.3 in about 95 % of seeds, and a retry after a failure succeeds as often as a first pass."""
    tasks, hits, width = _tasks(40), 0, []
    for seed in range(60):
        rng = np.random.default_rng(seed)
        m, _ = measure(
            BernoulliSolver(np.full(40, 0.3)),
            tasks,
            retries=10,
            rng=rng,
            idx=rng.integers(0, 40, (500, 40)),
            repeats=3,
            clock="cpu",
            time_value=1.0,
            flops_unit=1.0,
            cost=1.0,
            level=0.95,
        )
        lo, hi = m["p_ci"]
        hits += lo <= 0.3 <= hi
        width.append(hi - lo)
        assert abs(m["p"] - 0.3) < 0.1 and abs(m["p_after_failure"] - 0.3) < 0.12
    assert 52 <= hits <= 60  # 95 % nominal; binomial(60, 0.95) >= 52 with probability 0.99
    # the bootstrap width matches the binomial standard error of 400 i.i.d. passes
    assert np.median(width) == pytest.approx(2 * 1.96 * np.sqrt(0.3 * 0.7 / 400), rel=0.2)


def test_retries_are_independent_draws_not_repeats():
    """Tasks that are either always or never solved (rate 1 or 0) have the same p̂ as i.i.d. passes at 0.5,
    but a retry after a failure never succeeds: the estimate tells the two apart."""
    rates = np.r_[np.ones(30), np.zeros(30)]
    est = estimate_params(
        [BernoulliSolver(rates), BernoulliSolver(np.full(60, 0.5))],
        _tasks(60),
        value=5.0,
        retries=6,
        cost_per_call=[1.0, 1.0],
        n_boot=300,
    )
    split, iid = est["models"]
    assert split["p"] == pytest.approx(0.5) and split["p_after_failure"] == 0.0
    assert split["share_tasks_never_solved"] == pytest.approx(0.5) and split["iid_gap_ci"][0] > 0.3
    assert abs(iid["p_after_failure"] - 0.5) < 0.1 and iid["iid_gap_ci"][0] < 0 < iid["iid_gap_ci"][1]
    # the interval over tasks is wide for the split solver (tasks, not passes, are the sampling unit)
    assert split["p_ci"][1] - split["p_ci"][0] > 2 * (iid["p_ci"][1] - iid["p_ci"][0])


def test_latency_is_tokens_times_per_token_time_and_intervals_carry_through():
    est = estimate_params(
        [
            BernoulliSolver(np.full(30, 0.4), seconds=0.01, tokens=20),
            BernoulliSolver(np.full(30, 0.9), seconds=0.05),
        ],
        _tasks(30),
        value=5.0,
        retries=8,
        time_value=10.0,
        churn_penalty=2.0,
        cost_per_call=[1.0, 3.0],
        n_boot=400,
    )
    m1, m2 = est["models"]
    assert m1["seconds_per_pass"] == pytest.approx(20 * 0.01) and m1["t"] == pytest.approx(2.0)
    assert m2["t"] == pytest.approx(10 * 10 * 0.05)
    g = est["game"]
    assert (g.p1, g.p2, g.t1, g.t2, g.c1, g.c2, g.V, g.P) == (m1["p"], m2["p"], 2.0, 5.0, 1.0, 3.0, 5.0, 2.0)
    iv = est["intervals"]
    J = est["solution"]["equilibrium"]["provider_cost"]
    assert iv["provider_cost_ci"][0] <= J <= iv["provider_cost_ci"][1]
    assert 0 <= iv["share_same_policy"] <= 1 and sum(iv["policy_shares"].values()) == pytest.approx(1)
    # each bootstrap game is solved exactly: recompute one interval end from independent draws
    lo, hi = m1["p_ci"]
    assert lo < m1["p"] < hi


def test_digits_demo_estimate():
    tasks, solvers = digits_solvers(0, n_test=60, ensemble=1, hidden=16)
    est = estimate_params(
        solvers, tasks, value=5.0, time_value=1000.0, churn_penalty=1.0, flops_unit=1e5, n_boot=200
    )
    for m in est["models"]:
        assert 0 <= m["accuracy"] <= 1 and 0 < m["p"] <= 1 and m["t"] > 0 and m["c"] > 0
        assert m["p_ci"][0] <= m["p"] <= m["p_ci"][1] and m["passes"] == 60 * 8
    assert est["models"][0]["c"] == pytest.approx(2 * 16 * 10 / 1e5)  # logistic regression on 16 pixels
    assert est["models"][1]["c"] == pytest.approx(2 * (64 * 16 + 16 * 10) / 1e5)
    assert est["solution"]["equilibrium"]["i"] in (1, 2) and est["n_tasks"] == 60


def test_hf_sampler_counts_tokens_and_samples_the_model_distribution():
    tok = train_bpe(300)
    small = tiny_model("gpt2", "tiny", vocab_size=300)
    large = tiny_model("gpt2", "small", vocab_size=300)
    tasks = generated_tasks(6, seed=1)
    solvers = [hf_solver(small, tok, "a"), hf_solver(large, tok, "b")]
    est = estimate_params(
        solvers, tasks, value=5.0, time_value=10.0, flops_unit=1e6, retries=4, repeats=3, n_boot=100
    )
    n_tokens = sum(
        len(tok(t["question"])["input_ids"]) * len(t["choices"])
        + sum(len(tok(c)["input_ids"]) for c in t["choices"])
        for t in tasks
    )
    for solver, m in zip(solvers, est["models"]):
        n_params = sum(p.numel() for p in solver.model.parameters())
        assert m["flops_per_call"] == pytest.approx(2 * n_params * n_tokens / len(tasks))
        assert m["c"] == pytest.approx(m["flops_per_call"] / 1e6)
        assert m["t"] == pytest.approx(
            10 * m["tokens_per_pass"]["prompt"] * m["seconds_per_token"]["prefill"]
        )
        assert 0 <= m["accuracy"] <= 1 and m["t"] > 0
    assert est["models"][1]["c"] > est["models"][0]["c"]  # the larger model costs more per call
    assert set(est["by_type"]) == {"add", "multiply"}
    # the sampled answers follow softmax(log-likelihood / T): the empirical rate on one task matches it
    s = solvers[0]
    task = tasks[0]
    s.attempts(task, 1, np.random.default_rng(0))
    scores = s._scores[(task["question"], tuple(task["choices"]))]
    p_true = np.exp(scores - scores.max())[task["answer"]] / np.exp(scores - scores.max()).sum()
    hits = s.attempts(task, 4000, np.random.default_rng(1)).correct.mean()
    assert hits == pytest.approx(p_true, abs=4 * np.sqrt(p_true * (1 - p_true) / 4000) + 1e-9)


def test_cloze_sampling_on_a_tiny_lm():
    """Cloze passes: a prompt is read once, every retry samples its own continuation; a model that puts all
    its mass on the target always succeeds, and token counts are the prompt's and the target's + 1."""
    import torch

    tok = train_bpe(300)
    model = tiny_model("gpt2", "tiny", vocab_size=300)
    tasks = cloze_tasks(["alpha beta gamma delta " * 8 + "epsilon zeta eta theta iota."], 1, min_words=5)
    (task,) = tasks
    s = hf_solver(model, tok, "tiny", temperature=1.0)
    out = s.attempts(task, 16, np.random.default_rng(0))
    target = tok(task["target"], add_special_tokens=False)["input_ids"]
    assert out.correct.shape == (16,) and (out.new_tokens == len(target) + 1).all()
    assert (
        out.prompt_tokens == min(64, len(tok(task["prompt"], add_special_tokens=False)["input_ids"]))
    ).all()
    with torch.no_grad():  # a sharp model: the target's next token at every step, then a space
        seq = iter(target + tok(" x", add_special_tokens=False)["input_ids"][:1])
        real = model.forward

        def forced(*a, **k):
            out = real(*a, **k)
            out.logits[:, -1] = -1e9
            out.logits[:, -1, next(seq)] = 0.0
            return out

        model.forward = forced
        assert s.attempts(task, 1, np.random.default_rng(0)).correct.all()
        model.forward = real


def test_cloze_tasks_from_text_and_bad_input():
    text = "The quick brown fox jumps over the lazy dog and runs into the forest where other animals live."
    tasks = cloze_tasks([text] * 3, 3, seed=0, min_words=5)
    for t in tasks:
        assert text.startswith(t["prompt"] + t["target"]) and t["target"].startswith(" ")
    with pytest.raises(UserError, match="only 0 cloze tasks"):
        cloze_tasks(["too short"], 1)


def test_estimate_bad_input():
    tasks = _tasks(3)
    b = BernoulliSolver(np.full(3, 0.5))
    with pytest.raises(UserError, match="exactly two solvers"):
        estimate_params([b], tasks, value=1.0)
    with pytest.raises(UserError, match="cannot sample passes"):
        estimate_params([lambda t: 0, b], tasks, value=1.0, cost_per_call=[1, 2])
    with pytest.raises(UserError, match="retries must be >= 2"):
        estimate_params([b, b], tasks, value=1.0, retries=1, cost_per_call=[1, 2])
    with pytest.raises(UserError, match="temperature must be > 0"):
        digits_solvers(0, n_test=20, ensemble=1, hidden=4, temperature=0.0)
    with pytest.raises(UserError, match="V must be > 0"):
        estimate_params([b, b], tasks, value=0.0, cost_per_call=[1, 2], n_boot=10)
