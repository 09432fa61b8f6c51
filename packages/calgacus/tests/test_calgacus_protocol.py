"""encode/decode round trips on tiny real transformers models and the n-gram LM; BPE re-merges; errors."""

import pytest
import torch

from iclr26_calgacus import CalgacusError, CharNGramLM, HFRankLM, decode, encode, plausibility
from iclr26_calgacus.protocol import CalgacusWarning
from iclr26_core.errors import UserError
from iclr26_core.tokenizers import char_tokenizer

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,:;'!?\n-éöü✓"
KEY = "The weather today is"


@pytest.fixture(scope="module")
def char_models():
    from iclr26_core.models import tiny_model

    tok = char_tokenizer(ALPHABET)
    gpt2 = tiny_model("gpt2", vocab_size=len(tok), n_positions=160)
    llama = tiny_model("llama", vocab_size=len(tok), max_position_embeddings=160)
    return {"gpt2": HFRankLM(gpt2, tok), "llama": HFRankLM(llama, tok)}


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.parametrize("secret", ["Meet me at noon.", "", "line one\nline twö ✓\n\n"])
def test_round_trip_char_models(char_models, name, secret):
    lm = char_models[name]
    st = encode(secret, KEY, lm)
    assert st.n_tokens == len(lm.encode_text(secret))
    assert len(lm.encode_text(st.text)) == st.n_tokens
    assert decode(st.text, KEY, lm) == secret
    assert decode(st, KEY, lm) == secret
    assert not set(st.ids) & lm.special_ids


def test_encode_is_deterministic_and_key_changes_cover(char_models):
    lm = char_models["llama"]
    a, b = encode("hidden words", KEY, lm), encode("hidden words", KEY, lm)
    assert a.ids == b.ids and a.ranks == b.ranks
    assert encode("hidden words", "Another key", lm).ids != a.ids


def test_empty_prompts_start_from_bos(char_models):
    lm = char_models["gpt2"]
    st = encode("abc def", "", lm, secret_prefix="")
    assert decode(st.text, "", lm, secret_prefix="") == "abc def"


def test_trailer_round_trip(char_models):
    lm = char_models["llama"]
    st = encode("the secret", KEY, lm, trailer=".\n\n")
    assert st.n_tokens == len("the secret.\n\n")
    assert decode(st.text, KEY, lm, trailer=".\n\n") == "the secret"


def test_cover_logprob_matches_plausibility_and_naive_reference(char_models):
    lm = char_models["llama"]
    st = encode("plausible?", KEY, lm)
    p = plausibility(st.text, KEY, lm)
    # naive reference: re-run the full prefix for every token and gather log-softmax
    ids = lm.encode_text(KEY) + lm.encode_text(st.text)
    k = len(lm.encode_text(KEY))
    with torch.no_grad():
        ref = [
            torch.log_softmax(lm.model(input_ids=torch.tensor([ids[:t]])).logits[0, -1].double(), -1)[ids[t]]
            for t in range(k, len(ids))
        ]
    assert p == pytest.approx(float(sum(ref) / len(ref)), abs=1e-4)
    assert st.cover_logprob == pytest.approx(p, abs=1e-4)


def test_ngram_round_trip_and_unicode():
    lm = CharNGramLM(order=4, alphabet="✓éA:").fit(["some text to learn from, with more text.\n"])
    secret = "learn é✓ from\nmore"
    with pytest.warns(CalgacusWarning, match="long-context model"):
        st = encode(secret, "some text", lm)
    with pytest.warns(CalgacusWarning):
        assert decode(st.text, "some text", lm) == secret and len(st.text) == len(secret)


@pytest.fixture(scope="module")
def bpe_lm():
    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(300, texts=["the theme of the thesis is them and there " * 30])
    return CharNGramLM(order=2, tokenizer=tok).fit(["the theme of the thesis is them and there"])


def _remerge_secret(lm):
    """Construct a secret whose naive cover re-merges: pick a cover pair [a, b] with
    tok(detok([a, b])) != [a, b], and decode it (ids transport) into the secret that encodes to it."""
    from iclr26_calgacus.ranks import token_ranks, tokens_from_ranks

    for t in torch.nonzero(lm.admissible_mask()).flatten().tolist():
        word = lm.decode_ids([t])
        for cut in range(1, len(word)):
            left, right = lm.encode_text(word[:cut]), lm.encode_text(word[cut:])
            if len(left) != 1 or len(right) != 1:
                continue
            pair = left + right  # detok(pair) == word, which re-tokenises as the single token t
            x = tokens_from_ranks(lm, lm.encode_text("A text:"), token_ranks(lm, lm.encode_text("the"), pair))
            secret = lm.decode_ids(x)
            if lm.encode_text(secret) == x:
                return secret, pair
    raise AssertionError("no re-merging pair found")


@pytest.mark.filterwarnings("ignore::iclr26_calgacus.protocol.CalgacusWarning")
def test_bpe_naive_transport_fails_and_canonical_fixes(bpe_lm):
    lm = bpe_lm
    secret, pair = _remerge_secret(lm)
    naive = encode(secret, "the", lm, transport="ids")
    assert naive.ids == pair and not naive.text_exact
    assert lm.encode_text(naive.text) != naive.ids  # the text re-tokenises differently (BPE re-merge)
    assert decode(naive, "the", lm) == secret  # ids transport still works
    with pytest.warns(CalgacusWarning, match="transport='ids'"):
        assert not encode(secret, "the", lm).text_exact  # text transport: warned, never refused
    from iclr26_calgacus.protocol import canonical_filter

    assert not canonical_filter(lm)([pair[0]], pair[1])
    c = encode(secret, "the", lm, admissible="canonical")
    assert c.text_exact and lm.encode_text(c.text) == c.ids and len(c.ids) == len(pair)
    assert decode(c.text, "the", lm, admissible="canonical") == secret
    # canonical round trips of secrets the model predicts well, and of ones it does not
    for s in [" theme of the thesis", " them and there", " is them", "zq xj!? thesis"]:
        c = encode(s, "the", lm, admissible="canonical", secret_prefix="the")
        assert len(c.ids) == len(lm.encode_text(s)) and not set(c.ids) & lm.special_ids
        assert decode(c, "the", lm, secret_prefix="the") == s
        if c.text_exact:
            assert decode(c.text, "the", lm, admissible="canonical", secret_prefix="the") == s


def test_decode_checks_the_record(char_models):
    lm, other = char_models["llama"], char_models["gpt2"]
    st = encode("check me", KEY, lm, secret_prefix="k prime")
    assert decode(st, KEY, lm, secret_prefix="k prime") == "check me"
    with pytest.raises(CalgacusError, match="secret prefix differs"):
        decode(st, KEY, lm, secret_prefix="k prim")
    with pytest.raises(CalgacusError, match="key differs"):
        decode(st, KEY + " ", lm, secret_prefix="k prime")
    with pytest.raises(CalgacusError, match="weights_sha256"):
        decode(st, KEY, other, secret_prefix="k prime")  # same tokenizer, other weights
    with pytest.raises(CalgacusError, match="admissible"):
        decode(st, KEY, lm, secret_prefix="k prime", admissible="canonical")
    assert "k prime" not in str(st.checks) and len(st.checks["secret_prefix"]) == 4


@pytest.mark.filterwarnings("ignore::iclr26_calgacus.protocol.CalgacusWarning")
def test_declared_line_endings():
    """whitespace="lf": the cover avoids CR (the filter ranks CR tokens last), and the receiver reads CR LF
    as LF, so a line-ending conversion in transit does not garble the secret."""
    from iclr26_calgacus.ranks import tokens_from_ranks

    lm = CharNGramLM(order=3, alphabet="A text:").fit(["alpha beta\r\ngamma delta\nepsilon\r\n" * 20])
    secret = lm.decode_ids(tokens_from_ranks(lm, lm.encode_text("gamma"), [1] * 30))  # all ranks 1
    kw = {"secret_prefix": "gamma"}
    plain = encode(secret, "gamma", lm, **kw)
    assert "\r" in plain.text  # the model likes CR LF: a converted cover would not decode
    st = encode(secret, "gamma", lm, whitespace="lf", **kw)
    assert "\r" not in st.text and "\n" in st.text and st.text_exact
    converted = st.text.replace("\n", "\r\n")  # a mail transport converted the line endings
    assert decode(converted, "gamma", lm, whitespace="lf", **kw) == secret
    assert decode(converted, "gamma", lm, **kw) != secret  # undeclared: garbled
    assert decode(st, "gamma", lm, **kw) == secret  # the Stegotext carries its declaration


def test_ngram_key_acts_through_its_last_symbols_only():
    """Documented limitation (issue 16): a char n-gram sees only the last order-1 key characters, so a wrong
    key that ends like the right one decodes the secret; and its cover copies the secret once synchronised."""
    from iclr26_calgacus.cases import aligned_copy
    from iclr26_core.corpus import pydoc_text

    lm = CharNGramLM(order=3).fit([pydoc_text("train")[:20000]])
    secret = "the secret meeting is at noon in the old library"
    with pytest.warns(CalgacusWarning, match="last 2 symbol"):
        st = encode(secret, "A key that ends in: ", lm)
    with pytest.warns(CalgacusWarning):
        assert decode(st.text, "Totally different, but: ", lm) == secret  # same last 2 characters
    frac, longest = aligned_copy(lm.encode_text(st.text), lm.encode_text(secret), min_run=4)
    assert longest >= 4 and frac > 0 and st.text[-longest:] == secret[-longest:]  # the tail, verbatim


def test_aligned_copy_counts_verbatim_runs():
    from iclr26_calgacus.cases import aligned_copy

    cover, secret = list("abcXefghYZ"), list("abcdefghij")  # runs: abc (3), efgh (4)
    assert aligned_copy(cover, secret, min_run=4) == (0.4, 4)
    assert aligned_copy(cover, secret, min_run=3) == (0.7, 4)
    assert aligned_copy(list("xyz"), list("abc"), 1) == (0.0, 0)


def test_bad_inputs(char_models):
    lm = char_models["gpt2"]
    with pytest.raises(CalgacusError, match="positions"):
        encode("a" * 200, KEY, lm)
    with pytest.raises(CalgacusError, match="special"):
        encode("hi", "<|endoftext|><|endoftext|>", lm)
    with pytest.raises(CalgacusError, match="admissible alphabet"):
        encode("hi 汉字", KEY, lm)
    with pytest.raises(CalgacusError, match="not admissible"):
        decode("cover <|endoftext|> text", KEY, lm)
    with pytest.raises(CalgacusError, match="admissible must be"):
        encode("hi", KEY, lm, admissible="some")
    with pytest.raises(UserError, match="does not exist"):
        encode("hi", KEY, "/nonexistent/model/dir")
