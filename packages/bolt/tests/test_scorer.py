"""OptionScorer against a naive per-sequence loop; padding/batch invariance; chat-template L0; boundary
warning; length correction."""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch

from iclr26_bolt import OptionScorer, PromptTemplate
from iclr26_bolt.scorer import score_encoded

Q = "which object is on the table ?"
OPTS = ["cup", "red block", "small metal can", "plate"]


def naive(model, prompt_ids, option_ids):
    """Each (prompt + option) alone, unpadded: Σ log-softmax at the answer positions."""
    ids = torch.tensor([prompt_ids + option_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
    return sum(float(logp[len(prompt_ids) - 1 + j, t]) for j, t in enumerate(option_ids))


@pytest.mark.parametrize("share", [False, True])
def test_scores_match_naive_loop(tiny_lm, share):
    model, tok = tiny_lm
    sc = OptionScorer(model, tok, template=PromptTemplate(chat=False), share_prompt=share)
    enc = sc.encode(Q, OPTS, context="image: round ? ?")
    s = sc.score(Q, OPTS, context="image: round ? ?")
    ref = [naive(model, enc.prompt_ids, ids) for ids in enc.option_ids]
    assert torch.allclose(s.double(), torch.tensor(ref, dtype=torch.float64), atol=1e-5)
    assert len({len(i) for i in enc.option_ids}) > 1  # ragged option lengths were padded


def test_batch_and_padding_invariance(tiny_lm):
    model, tok = tiny_lm
    sc = OptionScorer(model, tok, template=PromptTemplate(chat=False))
    items = [(Q, OPTS, "a b"), ("what ?", ["yes", "no"], None), (Q, OPTS[::-1], "shiny shiny round")]
    encs = [sc.encode(q, o, context=c) for q, o, c in items]
    with torch.no_grad():
        ref = score_encoded(model, encs, sc.pad_id, batch_size=1)
        for bs in (3, 8, 64):
            for share in (False, True):
                got = score_encoded(model, encs, sc.pad_id, batch_size=bs, share_prompt=share)
                for a, b in zip(ref, got, strict=True):
                    assert torch.allclose(a, b, atol=1e-5)


def test_prompt_length_from_chat_template(tiny_lm):
    model, tok = tiny_lm
    tok = copy.deepcopy(tok)
    tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    sc = OptionScorer(model, tok)  # picks the chat template
    enc = sc.encode(Q, OPTS)
    user = sc.template.user_text(Q, OPTS)
    gen = tok.apply_chat_template(
        [{"role": "user", "content": user}], add_generation_prompt=True, tokenize=False
    )
    assert enc.prompt_ids == tok(gen, add_special_tokens=False)["input_ids"]
    full = tok.apply_chat_template(
        [{"role": "user", "content": user}, {"role": "assistant", "content": OPTS[1]}], tokenize=False
    )
    assert enc.prompt_ids + enc.option_ids[1] == tok(full, add_special_tokens=False)["input_ids"]


def test_plain_template_warns_once(tiny_lm):
    model, tok = tiny_lm
    with pytest.warns(UserWarning, match="no chat template"):
        OptionScorer(model, tok)


def test_boundary_merge_warns_and_scores_concatenation(world_tok):
    from iclr26_core.models import tiny_model

    _, tok = world_tok
    model = tiny_model("gpt2", vocab_size=len(tok))
    # the prompt ends in " sh" and the answer starts with "iny": " shiny" is one token across the boundary
    tpl = PromptTemplate(user="{question}", chat=False, answer_prefix="")
    sc = OptionScorer(model, tok, template=tpl)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        enc = sc.encode("image: round sh", ["iny", "arp"])
    assert any("does not start with the prompt" in str(w.message) for w in rec)
    assert enc.prompt_ids == tok("image: round sh", add_special_tokens=False)["input_ids"]
    assert enc.option_ids[0] == tok("iny", add_special_tokens=False)["input_ids"]
    joint = tok("image: round shiny", add_special_tokens=False)["input_ids"]
    assert enc.prompt_ids + enc.option_ids[0] != joint  # the concatenation, not the re-tokenised string


def test_length_penalty_and_normalisation(tiny_lm):
    model, tok = tiny_lm
    tpl = PromptTemplate(chat=False)
    raw = OptionScorer(model, tok, template=tpl).score(Q, OPTS)
    enc = OptionScorer(model, tok, template=tpl).encode(Q, OPTS)
    lens = torch.tensor([len(i) for i in enc.option_ids], dtype=torch.float32)
    gamma = 0.7
    pen = OptionScorer(model, tok, template=tpl, length_penalty=gamma).score(Q, OPTS)
    assert torch.allclose(pen, raw - gamma * lens.log(), atol=1e-5)
    tokn = OptionScorer(model, tok, template=tpl, normalize="token").score(Q, OPTS)
    assert torch.allclose(tokn, raw / lens, atol=1e-5)
    chars = OptionScorer(model, tok, template=tpl, normalize="char").score(Q, OPTS)
    assert torch.allclose(chars, raw / torch.tensor([len(" " + o) for o in OPTS]), atol=1e-5)
    assert math.isclose(float(torch.log(torch.tensor(1.0))), 0.0)


def test_world_words_are_single_tokens(world_tok):
    world, tok = world_tok
    for w in world.vocabulary():
        assert len(tok(" " + w, add_special_tokens=False)["input_ids"]) == 1, w


def test_batched_generation_equals_one_by_one(world_tok):
    from iclr26_bolt.reproduce import generate_answers
    from iclr26_bolt.world import world_template
    from iclr26_core.models import tiny_model

    _, tok = world_tok
    model = tiny_model("gpt2", vocab_size=len(tok), seed=3)
    sc = OptionScorer(model, tok, template=world_template(tok.eos_token))
    encs = [sc.encode(Q, OPTS[: 2 + i % 3], context=" ".join(["round"] * (1 + i))) for i in range(5)]
    one = generate_answers(model, tok, encs, 4, batch_size=1)
    assert generate_answers(model, tok, encs, 4, batch_size=5) == one
    assert len(one) == 5 and all(isinstance(t, str) for t in one)
