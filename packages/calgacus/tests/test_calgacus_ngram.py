"""Kneser–Ney counts and probabilities against a hand computation."""

import math

import numpy as np
import pytest

from iclr26_calgacus.ngram import CharNGramLM


def test_bigram_kneser_ney_by_hand():
    # text "abab", order 2, D = 0.5, vocabulary {a, b, \n} (V = 3); boundary symbol ^ padded on the left.
    # bigrams: ^a, ab, ba, ab  → c(a·) = {b: 2}, c(b·) = {a: 1}, c(^·) = {a: 1}
    # unigram continuation counts N1+(· w): a ← {^, b} = 2, b ← {a} = 1;  total 3, N1+ = 2 types
    # P1(a) = (2 − .5)/3 + .5·2/3 · 1/3 = 0.5 + 1/9;  P1(b) = 0.5/3 + 1/9;  P1(\n) = 1/9
    lm = CharNGramLM(order=2, discount=0.5).fit(["abab"])
    ia, ib, inl = lm.encode_text("a")[0], lm.encode_text("b")[0], lm.encode_text("\n")[0]
    p1 = {ia: 0.5 + 1 / 9, ib: 0.5 / 3 + 1 / 9, inl: 1 / 9}
    # P2(w | a) = max(c(aw) − .5, 0)/2 + .5·1/2 · P1(w)
    p = lm.distribution("a")
    for w in (ia, ib, inl):
        expected = max((2 if w == ib else 0) - 0.5, 0) / 2 + 0.25 * p1[w]
        assert p[w] == pytest.approx(expected, abs=1e-12)
    # unseen history "\n": falls back to P1
    q = lm.distribution("\n")
    for w in (ia, ib, inl):
        assert q[w] == pytest.approx(p1[w], abs=1e-12)


def test_discount_from_count_of_counts():
    lm = CharNGramLM(order=1).fit(["aab"])  # unigram level counts continuation N1+(· w) from bigrams
    assert 0 < lm.discounts[1] <= 1


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_distributions_sum_to_one(order):
    from iclr26_core.corpus import pydoc_text

    text = pydoc_text("validation")[:3000]
    lm = CharNGramLM(order=order).fit([text])
    for ctx in ["", "the ", "xq", text[100:120]]:
        p = lm.distribution(ctx)
        assert p.shape == (lm.vocab_size,)
        assert np.all(p > 0)
        assert math.isclose(p.sum(), 1.0, abs_tol=1e-9)


def test_token_level_ngram_over_bpe_ids():
    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(300, texts=["hello world, hello there. " * 20])
    lm = CharNGramLM(order=3, tokenizer=tok).fit(["hello world, hello there."])
    assert lm.vocab_size == len(tok)
    assert not bool(lm.admissible_mask()[0])  # <|endoftext|> is never admissible
    assert math.isclose(lm.distribution(lm.encode_text("hello")).sum(), 1.0, abs_tol=1e-9)
