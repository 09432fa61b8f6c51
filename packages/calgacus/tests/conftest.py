import base64
import hashlib
import os
import random

import pytest

# hostile secret pieces: hashes, base64, code, URLs, emoji, mixed scripts, literal specials, control chars
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


def _random_secret(rng: random.Random) -> str:
    return "".join(rng.choice(list(PIECES.values()))(rng) for _ in range(rng.randint(1, 3)))


@pytest.fixture(scope="session")
def random_secret():
    """``random_secret(rng)``: one to three hostile pieces joined."""
    return _random_secret


@pytest.fixture(scope="session")
def calgacus_cache(tmp_path_factory):
    """One temporary ICLR26_CACHE for the whole session: the smoke tiny LM is trained once into it."""
    path = tmp_path_factory.mktemp("iclr26_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR26_CACHE", str(path))
    mp.setenv("ICLR26_PROGRESS", "0")
    yield path
    mp.undo()


@pytest.fixture(autouse=True)
def _isolated_cache(calgacus_cache, monkeypatch):
    monkeypatch.setenv("ICLR26_CACHE", str(calgacus_cache))
    os.environ.setdefault("ICLR26_PROGRESS", "0")


@pytest.fixture(scope="session")
def tiny_smoke(calgacus_cache):
    from iclr26_calgacus.tiny import load_tiny

    return load_tiny("smoke", progress=False)


@pytest.fixture(scope="session")
def sp_tokenizer():
    """A Mistral/Llama-2-style SentencePiece BPE built locally: "▁" word marks (normaliser Prepend("▁") +
    Replace(" ", "▁"), no pre-tokeniser), 256 <0xNN> byte-fallback pieces, and the decoder Replace /
    ByteFallback / Fuse / Strip(" ", 1, 0) that drops the text's first space. Merges learned on pydoc text."""
    import json

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from iclr26_core.corpus import pydoc_text

    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=True
    )
    lines = pydoc_text("train")[:60_000].split("\n")
    learner.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=700, show_progress=False))
    learned = json.loads(learner.to_str())["model"]
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate(specials + [f"<0x{b:02X}>" for b in range(256)])}
    for t in sorted(learned["vocab"], key=learned["vocab"].get):
        vocab.setdefault(t, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    )
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens(specials)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def _filter_vs_whole(lm, n_prefixes: int, seed: int = 0) -> dict:
    """The local canonical filter against the whole-prefix re-tokenisation on every admissible candidate after
    ``n_prefixes`` canonical prefixes of real text; candidates that leave a UTF-8 character pending (accepted
    provisionally, checked once complete) are counted apart. Returns the counts and the disagreements."""
    import torch

    from iclr26_calgacus.canonical import CoverFilter
    from iclr26_core.corpus import pydoc_text

    filt = CoverFilter(lm, canonical=True)
    text = pydoc_text("validation")
    vocab = torch.nonzero(lm.admissible_mask()).flatten().tolist()
    rng = random.Random(seed)
    out = {"prefixes": 0, "compared": 0, "accepted": 0, "pending": 0, "pending_whole": 0, "disagree": []}
    while out["prefixes"] < n_prefixes:
        start = rng.randrange(len(text) - 300)
        ids = lm.encode_text(text[start : start + 150])
        prefix = ids[: rng.randrange(1, len(ids))]
        if lm.encode_text(lm.decode_ids(prefix)) != prefix:
            continue
        out["prefixes"] += 1
        for v, local in zip(vocab, filt.many(prefix, vocab)):
            full = lm.decode_ids([*prefix, v])
            whole = lm.encode_text(full) == [*prefix, v]
            if full.endswith("\ufffd"):
                out["pending"] += 1
                out["pending_whole"] += whole
                continue
            out["compared"] += 1
            out["accepted"] += whole
            if local != whole:
                out["disagree"].append((lm.decode_ids(prefix[-3:]), lm.decode_ids([v])))
    return out


@pytest.fixture(scope="session")
def filter_vs_whole():
    """``filter_vs_whole(lm, n_prefixes, seed=0)``: see `_filter_vs_whole`."""
    return _filter_vs_whole
