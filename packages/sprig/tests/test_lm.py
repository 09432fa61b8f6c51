"""lm_fitness on tiny real transformers models: formatting, continuation tokens, the one-pass shortcut, and the
log-likelihood scores against the core's independent multiple-choice scorer."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_core.evaluation import mc_accuracy
from iclr26_core.models import tiny_model
from iclr26_core.tokenizers import char_tokenizer, train_bpe
from iclr26_sprig import SystemPrompt, lm_fitness
from iclr26_sprig.components import Component
from iclr26_sprig.tasks import MCQuestion, MCTask

CHAT = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tasks():
    rng = np.random.default_rng(0)
    out = []
    for name in ("sum", "abc"):
        qs = [
            MCQuestion(
                f"{name} {i} {int(rng.integers(9))}?", ("one", "two", "three", "four"), int(rng.integers(4))
            )
            for i in range(12)
        ]
        out.append(MCTask(name, qs))
    return out


@pytest.fixture(scope="module")
def bpe():
    return train_bpe(300)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_scores_in_unit_interval_and_system_slot_matters(bpe, arch):
    model = tiny_model(arch, vocab_size=300)
    fit = lm_fitness(model, bpe, tasks(), n_questions=4)
    p = SystemPrompt([Component("a", "Be careful and precise.", "good_property")])
    s = fit.per_task([SystemPrompt(), p])
    assert s.shape == (2, 2) and np.all((s >= 0) & (s <= 1))
    assert fit.evaluations == 2 * 2 * 4
    q = fit.tasks[0].questions[0]
    ids_a, conts = fit.option_tokens(fit.format_prompt("", q), q)
    ids_b, _ = fit.option_tokens(fit.format_prompt(p.render(), q), q)
    rows = [[(len(i) - 1 + k, t) for k, t in enumerate(conts[1])] for i in (ids_a, ids_b)]
    la, lb = fit._forward_rows([ids_a + conts[1], ids_b + conts[1]], rows)
    assert la != lb


def test_chat_template_and_plain_fallback(bpe):
    model = tiny_model("gpt2", vocab_size=300)
    q = tasks()[0].questions[0]
    plain = lm_fitness(model, bpe, tasks())
    assert plain.format_prompt("Be nice.", q).startswith("Be nice.\n\nsum 0")
    assert plain.format_prompt("", q).startswith("sum 0") and plain.format_prompt("", q).endswith(
        "\nD. four\nAnswer:"
    )
    tok = train_bpe(300)
    tok.chat_template = CHAT
    chat = lm_fitness(model, tok, tasks())
    text = chat.format_prompt("Be nice.", q)
    assert text.startswith("<|system|>Be nice.\n<|user|>sum 0") and text.endswith("<|assistant|>Answer:")
    assert "<|system|>" not in chat.format_prompt("", q)
    assert lm_fitness(model, tok, tasks(), chat_template=False).format_prompt("X", q).startswith("X\n\n")


def test_saved_bpe_continuations_are_tokenised_after_the_prompt(bpe, tmp_path):
    from transformers import AutoTokenizer

    bpe.save_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    model = tiny_model("llama", vocab_size=300)
    fit = lm_fitness(model, tok, tasks(), n_questions=3)
    q = fit.tasks[0].questions[0]
    prompt = fit.format_prompt("", q)
    p_ids, conts = fit.option_tokens(prompt, q)
    full = tok(prompt + " B", add_special_tokens=False)["input_ids"]
    assert conts[1] == full[len(p_ids) :] and tok.decode(conts[1]) == " B"
    if any(len(c) > 1 for c in conts):  # " B" is not one token of this tiny BPE: no one-pass shortcut
        fit.per_task([SystemPrompt()])
        assert fit.stats == {"one_pass": 0, "per_option": 6, "cached": 0}


def test_loglik_matches_core_mc_scorer(bpe):
    """Option texts as continuations: our batched Σ log p agrees with iclr26_core.evaluation.mc_accuracy."""
    model = tiny_model("llama", vocab_size=300, seed=3)
    fit = lm_fitness(model, bpe, tasks(), show_options=False, n_questions=12)
    qs = fit.tasks[0].questions
    prompts = [fit.format_prompt("Think.", q) for q in qs]
    ref = mc_accuracy(model, bpe, prompts, [[" " + o for o in q.options] for q in qs], [q.answer for q in qs])
    ours = fit._predict_loglik(list(zip(prompts, qs, strict=True)))
    assert ours == ref["predictions"]


def test_one_pass_shortcut_equals_per_option_scores():
    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyzABCD .?:\n0123456789")
    model = tiny_model("gpt2", vocab_size=len(tok), seed=1)
    fit = lm_fitness(
        model, tok, tasks(), show_options=True, option_prefix="", chat_template="{system}|{question}|"
    )
    q = fit.tasks[1].questions[2]
    prompt = fit.format_prompt("be calm.", q)
    p_ids, conts = fit.option_tokens(prompt, q)
    assert all(len(c) == 1 for c in conts)
    one = fit._forward_one_pass([p_ids], [[(len(p_ids) - 1, c[0]) for c in conts]])[0]
    each = fit._forward_rows([p_ids + c for c in conts], [[(len(p_ids) - 1, c[0])] for c in conts])
    assert np.allclose(one, each, atol=1e-5)
    fit.per_task([SystemPrompt()])
    assert (
        fit.stats["one_pass"] == fit.cost(1) == 12 and fit.stats["per_option"] == 0
    )  # 6 train questions x 2


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_kv_cache_scores_equal_full_forwards(bpe, arch):
    """The cached scorer (shared prefixes reused, multi-token options) gives the full-sequence Σ log p."""
    model = tiny_model(arch, vocab_size=300, seed=2)
    tok = train_bpe(300)
    tok.chat_template = CHAT
    qs = [
        MCQuestion("Complete it.", ("alpha", "be", "gamma", "d"), 2, lead=f"the {w} is", continuations=None)
        for w in ("cat", "dog", "cat")
    ]
    qs = [
        MCQuestion(q.question, q.options, q.answer, lead=q.lead, continuations=(" al", " bet", " x", " d"))
        for q in qs
    ]
    fit = lm_fitness(model, tok, [MCTask("t", qs * 4)], kv_cache=True)
    items = [(fit.format_prompt(s, q), q) for s in ("Be calm.", "Be calm.", "") for q in qs]
    assert items[0][0].endswith("<|assistant|>the cat is")  # ``lead`` opens the assistant turn
    cached = fit._scores_cached(items)
    for (prompt, q), got in zip(items, cached, strict=True):
        p_ids, conts = fit.option_tokens(prompt, q)
        assert [tok.decode(c) for c in conts] == list(q.continuations)
        rows = [[(len(p_ids) - 1 + k, t) for k, t in enumerate(c)] for c in conts]
        ref = fit._forward_rows([p_ids + c for c in conts], rows)
        assert np.allclose(got, ref, atol=1e-4), (got, ref)
    assert fit.stats["cached"] == len(items)
    fit.kv_cache = False
    plain = fit._predict_loglik(items)
    fit.kv_cache = True
    assert fit._predict_loglik(items) == plain
