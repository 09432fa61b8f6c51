"""Small-data safeguards: the empty prompt and the parents stay in the final dev pick, warnings for tiny splits,
the paired test-gain interval checked against the core's bootstrap, and the operator specs."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_core.evaluation import bootstrap_ci
from iclr26_sprig import OracleLLM, sprig, sprig_ga
from iclr26_sprig.components import SystemPrompt
from iclr26_sprig.fitness import Fitness
from iclr26_sprig.intervals import paired_gain_ci
from iclr26_sprig.operators import load_operator
from iclr26_sprig.tasks import MCQuestion, MCTask, small_data_warnings


class EveryEditHurts(Fitness):
    """A model on which every non-empty prompt is worse than the empty one, on every split."""

    task_names = ("a", "b")

    def _questions(self, split):
        return 2

    def _per_task(self, prompts, split):
        return np.array([[0.5, 0.5] if not p else [0.3 - 0.01 * len(p)] * 2 for p in prompts])


@pytest.mark.parametrize("algorithm", ["sprig", "sprig_ga"])
def test_empty_prompt_wins_when_every_edit_hurts(algorithm):
    pool = OracleLLM(n_tasks=2, n_components=12, seed=0).components
    fit = EveryEditHurts()
    if algorithm == "sprig":
        r = sprig(fit, pool, beam_size=3, top_ucb=4, n_iters=3)
    else:
        r = sprig_ga(fit, pool, generations=3, n_real=4)
    assert r.best == SystemPrompt() and r.best_score == 0.5 and SystemPrompt() in r.final


def test_parents_stay_in_the_final_pick():
    o = OracleLLM(n_tasks=6, n_components=40, seed=1)
    r = sprig(o.fitness(10, 1, 0), o.components, beam_size=3, top_ucb=5, n_iters=4, seed=0)
    lengths = sorted({len(p) for p in r.final})
    assert lengths[0] == 0 and len(lengths) >= 3  # empty, the parents (one edit shorter) and the final beam


def test_small_data_warnings():
    qs = [MCQuestion(f"q{i}", ("a", "b"), 0) for i in range(4)]
    tasks = [MCTask("tiny", qs)]  # train 2 (< 6: dev is train), test 2
    lines = small_data_warnings(tasks)
    assert any("dev holds 0" in x for x in lines) and any("dev is the train split" in x for x in lines)
    only_train = [MCTask("t", [MCQuestion(f"q{i}", ("a", "b"), 0, "train") for i in range(200)])]
    lines = small_data_warnings(only_train)
    assert lines == [lines[0]] and "test falls back to train" in lines[0]  # dev 33 >= 20
    healthy = [MCTask(f"t{k}", [MCQuestion(f"q{i}", ("a", "b"), 0) for i in range(80)]) for k in range(3)]
    assert small_data_warnings(healthy) == []


def test_gain_interval_matches_the_core_bootstrap_on_one_task():
    rng = np.random.default_rng(0)
    base, new = rng.random(400) < 0.5, rng.random(400) < 0.6
    gain, lo, hi = paired_gain_ci(base, new, np.zeros(400, int), n_boot=4000)
    ref = bootstrap_ci(new.astype(float) - base, n_boot=4000, seed=1)
    assert gain == pytest.approx(ref[0]) and lo == pytest.approx(ref[1], abs=0.01)
    assert hi == pytest.approx(ref[2], abs=0.01) and lo < gain < hi


def test_gain_interval_averages_tasks_not_questions():
    base = np.zeros(12)
    new = np.array([1] * 2 + [0] * 10, float)  # task 0 (2 questions) all gained, task 1 (10) none
    gain, lo, hi = paired_gain_ci(base, new, np.array([0] * 2 + [1] * 10))
    assert gain == pytest.approx(0.5) and lo == hi == pytest.approx(0.5)


def test_operator_specs():
    assert load_operator(None, "paraphraser") is None
    fn = load_operator("iclr26_sprig.oracle:category_counts", "proposer")
    assert fn(9) == [1] * 9


def test_lm_writer_proposes_and_paraphrases_on_a_tiny_model():
    import torch

    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import char_tokenizer
    from iclr26_sprig.operators import LMWriter

    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz .,:\n")
    model = tiny_model("gpt2", vocab_size=len(tok), n_positions=512).eval()
    torch.manual_seed(0)
    writer = LMWriter(model, tok, n=3, max_new_tokens=8)
    pool = OracleLLM(n_tasks=2, n_components=12, seed=0).components
    parent = SystemPrompt(pool[:2])
    texts = writer.paraphraser("be careful.")
    assert all(isinstance(t, str) and t for t in texts) and len(texts) <= 3
    for op in ("add_useful", "add_useless", "refine_subset", "rephrase"):
        child = writer.proposer(op, parent)
        if child is None:
            continue
        if op.startswith("add"):
            assert list(child[:2]) == list(parent) and child[-1].category == "proposed"
        elif op == "rephrase":
            assert child[0].identity == parent[0].identity and child[1] == parent[1]
        else:
            assert len(child) == 1
    assert writer.proposer("swap", parent) is None and writer.calls >= 1
