"""Property: every secret round-trips (issue 16). Random secrets — hashes, code, URLs, emoji, mixed scripts,
literal special-token strings — through a byte-level BPE (which can spell any string): 100 % exact through
the ids, and through the text whenever ``text_exact`` is true. Plus the local canonical filter against the
whole-prefix check it replaces."""

import base64
import hashlib
import random
import warnings

import pytest
import torch

from iclr26_calgacus import CharNGramLM, HFRankLM, decode, encode
from iclr26_calgacus.canonical import CoverFilter
from iclr26_calgacus.protocol import CalgacusWarning

PIECES = {
    "hash": lambda r: hashlib.sha256(r.randbytes(16)).hexdigest()[: r.randint(8, 64)],
    "b64": lambda r: base64.b64encode(r.randbytes(r.randint(3, 24))).decode(),
    "code": lambda r: r.choice(
        [
            "def f(x):\n    return x**2 + 1  # ok\n",
            "for (int i = 0; i < n; ++i) { a[i] = b[i] ^ 0xFF; }",
            'print(f"{value!r:>10}")\t',
            "SELECT * FROM users WHERE id = '42';",
            '<div class="a">&nbsp;</div>\r\n',
        ]
    ),
    "url": lambda r: (
        f"https://ex{r.randint(0, 99)}.org/p/{r.randbytes(3).hex()}?q=a+b&id={r.randint(0, 10**6)}#x"
    ),
    "emoji": lambda r: "".join(
        r.choice(["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "🧪", "✓", "❤️"]) for _ in range(r.randint(1, 4))
    ),
    "scripts": lambda r: r.choice(
        ["Привет мир", "Γειά σου", "漢字かなカナ", "مرحبا", "नमस्ते", "שלום", "한국어", "Ωμέγα"]
    ),
    "prose": lambda r: r.choice(["The secret is here. ", "meet at noon", " and then,", "\n\n", "   "]),
    "special": lambda r: r.choice(["<|endoftext|>", "<pad>", "<unk>"]),
    "control": lambda r: r.choice(["\x00", "\x1b[0m", "\u200b", "\ufffd", "\t\t"]),
}


def random_secret(rng: random.Random) -> str:
    return "".join(rng.choice(list(PIECES.values()))(rng) for _ in range(rng.randint(1, 4)))


@pytest.fixture(scope="module")
def bpe_models():
    from iclr26_core.corpus import pydoc_text
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(512)
    ngram = CharNGramLM(3, tokenizer=tok).fit([pydoc_text("train")[:60_000]])
    gpt2 = HFRankLM(tiny_model("gpt2", vocab_size=len(tok), n_positions=512), tok)
    return {"bpe-3gram": ngram, "bpe-gpt2": gpt2}


@pytest.mark.parametrize("name,n", [("bpe-3gram", 30), ("bpe-gpt2", 12)])
def test_every_secret_round_trips(bpe_models, name, n):
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
    # the secrets are hard (high ranks land among the filter's rejects): some covers must still be exact
    assert stats["exact_text"] >= 1, stats


def test_ordinary_prose_covers_are_text_exact(bpe_models):
    """Natural secrets under the BPE 3-gram: canonical covers re-tokenise exactly (the filter works)."""
    from iclr26_core.corpus import pydoc_text

    lm = bpe_models["bpe-3gram"]
    text = pydoc_text("validation")
    rng = random.Random(3)
    exact = 0
    for _ in range(8):
        start = rng.randrange(len(text) - 200)
        secret = text[start : start + 120]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalgacusWarning)
            st = encode(secret, "Numeric literals:", lm, admissible="canonical", transport="ids")
            assert decode(st, "Numeric literals:", lm) == secret
        exact += st.text_exact
    assert exact >= 6, exact


def test_local_filter_equals_whole_prefix_check(bpe_models):
    """On canonical prefixes of real text the local (last-word) filter decides exactly as the whole-prefix
    re-tokenisation, except for byte tokens that leave a UTF-8 character pending (accepted provisionally)."""
    from iclr26_core.corpus import pydoc_text

    lm = bpe_models["bpe-3gram"]
    filt = CoverFilter(lm, canonical=True)
    text = pydoc_text("validation")
    vocab = torch.nonzero(lm.admissible_mask()).flatten().tolist()
    rng = random.Random(0)
    checked = pending = 0
    while checked < 6:
        start = rng.randrange(len(text) - 300)
        ids = lm.encode_text(text[start : start + 150])
        prefix = ids[: rng.randrange(1, len(ids))]
        if lm.encode_text(lm.decode_ids(prefix)) != prefix:
            continue
        checked += 1
        for v, local in zip(vocab, filt.many(prefix, vocab)):
            whole = lm.encode_text(lm.decode_ids([*prefix, v])) == [*prefix, v]
            if lm.decode_ids([*prefix, v]).endswith("\ufffd"):
                pending += 1
                assert not whole
                continue
            assert local == whole, (lm.decode_ids(prefix[-3:]), lm.decode_ids([v]))
    assert pending > 0


def test_one_forced_step_does_not_reject_the_rest(bpe_models):
    """After a rejected token, later candidates are judged on their own word (no cascade)."""
    lm = bpe_models["bpe-3gram"]
    filt = CoverFilter(lm, canonical=True)
    the, me = lm.encode_text(" the")[0], lm.encode_text("me")[0]
    assert not filt([the], me)  # " the" + "me" re-merges
    prefix = [the, me]  # forced: a non-canonical prefix
    assert filt(prefix, lm.encode_text(" cat")[0])  # a new word is fine
    whole = lm.encode_text(lm.decode_ids([*prefix, lm.encode_text(" cat")[0]]))
    assert whole != [*prefix, lm.encode_text(" cat")[0]]  # the whole-prefix check would have rejected it
