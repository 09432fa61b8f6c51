"""Answer extraction, exact match (on a stub model that knows the answers), the gain arithmetic."""

from __future__ import annotations

import pytest
import torch

from iclr26_reasoning_data.evaluate import exact_match, extract_answer, gains
from iclr26_reasoning_data.tasks import ReasoningTasks, char_tokenizer

TOK = char_tokenizer()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("=7\n", "7"),
        ("b=7;c=9;d=6 =6\nQ: next", "6"),
        ("x=1, y=0, z=5 =5", "5"),
        ("48 49 =49\n", "49"),
        ("Answer: 12", "12"),
        ("so the total is 1,234.\nAnswer: 1,234.", "1234"),
        ("b=7;c=9;d=6", None),  # no final marker: '=' inside the trace does not count
        ("no marker here", None),
        ("", None),
    ],
)
def test_extract_answer(text, want):
    assert extract_answer(text) == want


class Oracle(torch.nn.Module):
    """A stub causal LM whose greedy continuation of a known prompt is that prompt's answer (then padding)."""

    def __init__(self, examples, tokenizer, wrong_family=None):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.tok = tokenizer
        self.answers = {e.prompt: ("0 =x\n" if e.family == wrong_family else e.answer) for e in examples}

    def generate(self, input_ids, attention_mask, max_new_tokens, pad_token_id, **_):
        rows = []
        for ids, mask in zip(input_ids, attention_mask, strict=True):
            prompt = self.tok.decode(ids[mask == 1].tolist())
            new = self.tok(self.answers[prompt], add_special_tokens=False)["input_ids"][:max_new_tokens]
            rows.append(ids.tolist() + new + [pad_token_id] * (max_new_tokens - len(new)))
        return torch.tensor(rows)


def test_exact_match_is_one_per_family_for_an_oracle():
    ev = ReasoningTasks(seed=0).eval_set(5)
    res = exact_match(Oracle(ev, TOK), TOK, ev, batch_size=7)
    assert res["per_family"] == {f: 1.0 for f in range(8)} and res["mean"] == 1.0 and res["n"] == 40


def test_exact_match_mean_is_over_families():
    ev = ReasoningTasks(seed=0).eval_set(5)
    res = exact_match(Oracle(ev, TOK, wrong_family=3), TOK, ev)
    assert res["per_family"][3] == 0.0 and res["mean"] == pytest.approx(7 / 8)


def test_gains():
    g = gains(0.266, 0.209)
    assert g["abs"] == pytest.approx(0.057) and g["rel"] == pytest.approx(0.057 / 0.209)
    assert gains(0.2, 0.0)["rel"] is None


def test_majority_answerer_scores_the_majority_baseline_and_nothing_on_the_rest():
    """A model that always answers its family's majority answer: exact match = the majority baseline computed
    by counting (independently), and 0 on the non-majority problems; an oracle scores 1 on those."""
    from iclr26_reasoning_data.experiment import baselines
    from iclr26_reasoning_data.tasks import make_example

    tasks = ReasoningTasks([3, 4, 5, 6], holdout=20)
    ev = tasks.eval_set(20, templates=[2])
    base = baselines(tasks, ev)
    majority = {int(f): a for f, a in base["majority_answer"].items()}
    prior = Oracle(ev, TOK)
    prior.answers = {e.prompt: f"0 ={majority[e.family]}\n" for e in ev}
    res = exact_match(prior, TOK, ev, majority=majority)
    counted = [sum(e.final == majority[f] for e in ev if e.family == f) / 20 for f in (3, 4, 5, 6)]
    assert res["mean"] == pytest.approx(sum(counted) / 4) == pytest.approx(base["majority"])
    assert res["non_majority"] == 0.0
    assert exact_match(Oracle(ev, TOK), TOK, ev, majority=majority)["non_majority"] == 1.0
    # chance: uniform over the family's answers (count: 0-5, the others 0-9)
    assert base["chance"] == pytest.approx((0.1 + 1 / 6 + 0.1 + 0.1) / 4)
    assert make_example(3, (1, 2, 3, 4, 5), 2).final == "5"
