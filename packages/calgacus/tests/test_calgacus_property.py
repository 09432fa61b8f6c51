"""Property: every secret round-trips (issue 16). Random secrets — hashes, code, URLs, emoji, mixed scripts,
literal special-token strings — through a byte-level BPE (which can spell any string): 100 % exact through
the ids, and through the text whenever ``text_exact`` is true. Plus the local canonical filter against the
whole-prefix check it replaces."""

import random
import warnings

import pytest

from iclr26_calgacus import CharNGramLM, HFRankLM, decode, encode
from iclr26_calgacus.canonical import CoverFilter
from iclr26_calgacus.protocol import CalgacusWarning


@pytest.fixture(scope="module")
def bpe_models():
    from iclr26_core.corpus import pydoc_text
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(512)
    ngram = CharNGramLM(3, tokenizer=tok).fit([pydoc_text("train")[:60_000]])
    gpt2 = HFRankLM(tiny_model("gpt2", vocab_size=len(tok), n_positions=512), tok)
    return {"bpe-3gram": ngram, "bpe-gpt2": gpt2}


@pytest.mark.parametrize("name,n", [("bpe-3gram", 10), ("bpe-gpt2", 2)])
def test_every_secret_round_trips(bpe_models, random_secret, name, n):
    lm = bpe_models[name]
    rng = random.Random(f"calgacus-{name}")
    key, prefix = "The for statement is used to iterate:", "A text:"
    stats = {"exact_text": 0, "rejected_steps": 0}
    for _ in range(n):
        secret = random_secret(rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalgacusWarning)
            st = encode(secret, key, lm, secret_prefix=prefix, admissible="canonical", transport="ids")
            assert st.n_tokens == len(st.ids) == len(lm.encode_text(secret))
            assert not set(st.ids) & lm.special_ids
            assert decode(st, key, lm, secret_prefix=prefix) == secret  # ids transport: always exact
            assert decode(st.ids, key, lm, secret_prefix=prefix, admissible="canonical") == secret
            assert st.text_exact == (lm.encode_text(st.text) == st.ids)  # the record tells the truth
            if st.text_exact:
                assert decode(st.text, key, lm, secret_prefix=prefix, admissible="canonical") == secret
        stats["exact_text"] += st.text_exact
        stats["rejected_steps"] += len(st.rejected_steps)
    if name == "bpe-3gram":  # a trained model: some of these hard secrets still give exact covers
        assert stats["exact_text"] >= 1, stats


def test_ordinary_prose_covers_are_text_exact(bpe_models):
    """Natural secrets under the BPE 3-gram: a canonical cover with no forced step (no secret rank beyond
    the accepted candidates) and no unfinished UTF-8 character re-tokenises exactly."""
    from iclr26_core.corpus import pydoc_text

    lm = bpe_models["bpe-3gram"]
    text = pydoc_text("validation")
    rng = random.Random(3)
    clean = 0
    for _ in range(8):
        start = rng.randrange(len(text) - 200)
        secret = text[start : start + 120]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalgacusWarning)
            st = encode(secret, "Numeric literals:", lm, admissible="canonical", transport="ids")
            assert decode(st, "Numeric literals:", lm) == secret
        if not st.rejected_steps and "\ufffd" not in st.text:
            clean += 1
            assert st.text_exact
    assert clean >= 3, clean


def test_local_filter_equals_whole_prefix_check(bpe_models, filter_vs_whole):
    """On canonical prefixes of real text the local (last-word) filter decides exactly as the whole-prefix
    re-tokenisation, except for byte tokens that leave a UTF-8 character pending (accepted provisionally)."""
    got = filter_vs_whole(bpe_models["bpe-3gram"], 6)
    assert got["disagree"] == [] and got["compared"] > 2000
    assert got["pending"] > 0 and got["pending_whole"] == 0


def test_one_forced_step_does_not_reject_the_rest(bpe_models):
    """After a forced (non-canonical) step, the next word is judged on its own (no cascade), where the
    whole-prefix check would reject every later candidate."""
    lm = bpe_models["bpe-3gram"]
    filt = CoverFilter(lm, canonical=True)
    pair = next(
        [a, b]
        for t in range(3, 400)
        if not lm.decode_ids([t])[:1].isspace()
        for cut in range(1, len(lm.decode_ids([t])))
        for a, b in [(lm.encode_text(lm.decode_ids([t])[:cut]), lm.encode_text(lm.decode_ids([t])[cut:]))]
        if len(a) == 1 and len(b) == 1
    )  # two tokens whose text re-tokenises as one
    pair = [pair[0][0], pair[1][0]]
    assert not filt(pair[:1], pair[1])
    word = next(w for w in (" the", " is", " of", " a") if len(lm.encode_text(w)) == 1)
    new = lm.encode_text(word)[0]
    assert filt(pair, new)  # a new word after the forced step is accepted
    assert lm.encode_text(lm.decode_ids([*pair, new])) != [*pair, new]  # the whole check rejects it


def test_pending_utf8_bytes_are_checked(bpe_models):
    """Byte tokens of an unfinished character: accepted while they can complete one character, rejected
    after a whitespace run that the coming (non-space) character would split, and nothing but the rest of
    the character may follow them — each verdict checked against the whole re-tokenisation."""
    lm = bpe_models["bpe-3gram"]
    filt = CoverFilter(lm, canonical=True)
    whole = lambda ids: lm.encode_text(lm.decode_ids(ids)) == ids  # noqa: E731
    lead, cont = lm.encode_text("é")  # two byte tokens, each decoding alone to U+FFFD
    word, run, new_word = lm.encode_text("The"), lm.encode_text("x\n  "), lm.encode_text(" the")
    assert len(run) == 2 and len(new_word) == 1
    assert filt(word, lead) and filt([*word, lead], cont) and whole([*word, lead, cont])
    assert not filt([*word, lead], lead)  # two lead bytes never make one character
    assert not filt([*word, lead], new_word[0]) and not whole([*word, lead, *new_word])
    assert not filt(run, lead) and not whole([*run, lead, cont])  # "\n  é" re-tokenises as "\n ", " é"
