"""Tier B's planted world: the label rule, one token per phrase, the training text = the scored prompt."""

from __future__ import annotations

from iclr26_sprig import SystemPrompt, tierb


def test_label_rule_and_splits():
    w = tierb.PlantedWorld.make(0)
    h, bad = sorted(w.helpful)[0], sorted(w.harmful)[0]
    neutral = next(i for i in range(24) if i not in w.helpful | w.harmful)
    c = int(w.answer[1, 3])
    assert w.label([], 1, 3) == (c + 1) % 4 and w.label([neutral], 1, 3) == (c + 1) % 4
    assert w.label([h], 1, 3) == c and w.label([neutral, h], 1, 3) == c
    assert w.label([h, bad], 1, 3) == (c + 1) % 4
    assert len(w.train_keys) == 14 and not set(w.train_keys) & set(w.test_keys)
    assert len(w.helpful | w.harmful) == 8


def test_phrases_are_single_tokens_and_training_text_matches_the_scored_prompt():
    tok = tierb.tokenizer()
    for ph in tierb.PHRASES:
        assert len(tok(ph, add_special_tokens=False)["input_ids"]) == 1
    w = tierb.PlantedWorld.make(1)
    import numpy as np

    text = w.example(np.random.default_rng(5))
    prompt_part, letter = text[:-2], text[-2]
    model = object.__new__(object)
    fit = tierb.fitness_for(model, tok, w.tasks(), 8, 0)
    task = w.tasks()[0]
    q = task.questions[0]
    system = prompt_part.split("\n")[0][3:]
    assert fit.format_prompt("", q) == f"S: \nQ: {q.question}\nA: "
    assert prompt_part.startswith(f"S: {system}\nQ: ") and letter in "ABCD"
    assert fit.option_tokens(fit.format_prompt(system, q), q)[1] == [
        [tok.convert_tokens_to_ids(x)] for x in "ABCD"
    ]
    assert (
        len(tierb.components()) == 24
        and SystemPrompt(tierb.components()[:2]).render() == "Be precise. Think first."
    )
