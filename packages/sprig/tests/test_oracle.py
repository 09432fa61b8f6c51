"""OracleLLM: exact expectations against Monte-Carlo, the weights against hand computations, transfer(1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iclr26_sprig.components import SystemPrompt
from iclr26_sprig.oracle import OracleLLM, category_counts, prompt_weights


def sig(z):
    return 1 / (1 + math.exp(-z))


def test_category_counts():
    assert category_counts(300) == [90, 45, 30, 20, 20, 20, 30, 25, 20]
    assert sum(category_counts(40)) == 40 and min(category_counts(40)) >= 1


def test_expected_accuracy_matches_monte_carlo():
    o = OracleLLM(n_tasks=6, n_components=40, seed=3)
    prompt = SystemPrompt(o.components[i] for i in (0, 5, 17, 30))
    fit = o.fitness(n_questions=10, seed=1)
    draws = fit.per_task([prompt] * 20_000)  # 20,000 independent fitness draws
    p = o.expected_accuracy(prompt)
    se = np.sqrt(p * (1 - p) / (10 * 20_000))
    assert np.all(np.abs(draws.mean(0) - p) < 3 * se)
    assert fit.evaluations == 20_000 * 6 * 10


def test_two_component_weights_by_hand():
    o = OracleLLM(n_tasks=6, n_components=40, seed=0)
    e = o.effects
    same = [c for c in o.components if c.category == "good_property"][:2]
    i, j = (o.components.index(c) for c in same)
    t = 2
    # same category: second counts half; positions 1.1 and 0.9; two components cost 0.08
    s = 1.1 * e[i, t] + 0.5 * 0.9 * e[j, t] - 0.08
    want = 0.25 + 0.75 * sig(o.b[t] + math.tanh(s))
    assert math.isclose(o.expected_accuracy(SystemPrompt(same))[t], want, rel_tol=1e-12)
    k = o.components.index(next(c for c in o.components if c.category == "role"))
    s2 = 1.1 * e[i, t] + 0.9 * e[k, t] - 0.08  # different categories: no redundancy discount
    got = o.expected_accuracy(SystemPrompt([o.components[i], o.components[k]]))[t]
    assert math.isclose(got, 0.25 + 0.75 * sig(o.b[t] + math.tanh(s2)), rel_tol=1e-12)
    one = 0.25 + 0.75 * sig(o.b[t] + math.tanh(e[i, t] - 0.04))  # m = 1: position weight 1
    assert math.isclose(o.expected_accuracy(SystemPrompt([o.components[i]]))[t], one, rel_tol=1e-12)
    assert np.allclose(prompt_weights(["a", "b", "a"]), [1.1, 1.0, 0.5 * 0.9])


def test_empty_prompt_and_task_phrases():
    o = OracleLLM(n_tasks=6, n_components=40, seed=0)
    assert np.allclose(o.expected_accuracy(), 0.25 + 0.75 / (1 + np.exp(-o.b)))
    name = o.task_names[1]
    ph = o.task_phrases()[name][:2]
    z = o.b[1] + math.tanh(o.phrase_effects[1, 0] + o.phrase_effects[1, 1] - 0.08)
    acc = o.expected_accuracy((), {name: ph})
    assert math.isclose(acc[1], 0.25 + 0.75 * sig(z)) and np.allclose(
        np.delete(acc, 1), np.delete(o.expected_accuracy(), 1)
    )


def test_transfer():
    o = OracleLLM(n_tasks=6, n_components=40, seed=0)
    same = o.transfer(1.0)
    p = SystemPrompt(o.components[:3])
    assert np.array_equal(same.expected_accuracy(p), o.expected_accuracy(p))
    far = o.transfer(0.4, base_shift=1.0)
    assert np.allclose(far.b, o.b + 1.0) and np.array_equal(far.mu, o.mu)
    assert not np.allclose(far.g, o.g) and o.transfer(0.4, 1.0).g.tolist() == far.g.tolist()
    corr = np.corrcoef(OracleLLM(47, 300, 1).g, OracleLLM(47, 300, 1).transfer(0.7).g)[0, 1]
    assert 0.55 < corr < 0.85


def test_paraphrase_effect_and_cot():
    o = OracleLLM(n_tasks=6, n_components=40, seed=0)
    c = o.components[4]
    alt = o.paraphraser(c.text)
    assert len(alt) == 3
    from iclr26_sprig.components import Component

    pc = Component("x", alt[1], c.category, source=c.id)
    want = 0.25 + 0.75 / (1 + np.exp(-(o.b + np.tanh(o.paraphrase_mult[4, 1] * o.effects[4] - 0.04))))
    assert np.allclose(o.expected_accuracy(SystemPrompt([pc])), want)
    assert o.cot_prompt()[0].category == "CoT"
    with pytest.raises(Exception, match="no component"):
        o.expected_accuracy(SystemPrompt([Component("z", "unknown", "role")]))
