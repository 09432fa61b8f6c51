"""Byte-exact transport through files (issue 43): secrets, covers and decoded secrets keep every byte
(CR, CR LF, control characters), ``text_exact`` is what the written file re-tokenises to, and a secret the
tokenizer does not give back is refused."""

import copy
import json
import random
import warnings

import pytest

from iclr26_calgacus import HFRankLM, encode
from iclr26_calgacus.cli import main
from iclr26_calgacus.protocol import CalgacusWarning
from iclr26_calgacus.ranks import CalgacusError, token_ranks, tokens_from_ranks
from iclr26_core.testing import assert_one_line_error, run_cli

KEY, PREFIX = "The list display is", "A text:"


def _cli_round_trip(tmp_path, model: str, secret: str, tag: str) -> dict:
    """encode ``secret`` from a file, then decode the cover text file and the ids file; returns the ids
    record with the cover's bytes and both decoded byte strings."""
    src, cover = tmp_path / f"{tag}.secret", tmp_path / f"{tag}.cover"
    src.write_bytes(secret.encode())
    args = ["--model", model, "--key", KEY]
    res = run_cli(main, ["encode", "--secret-file", str(src), *args, "--out", str(cover)])
    assert res.code == 0, res.output
    rec = json.loads((tmp_path / f"{tag}.cover.ids.json").read_text())
    out = {"record": rec, "cover": cover.read_bytes()}
    for name, stego in (("text", cover), ("ids", tmp_path / f"{tag}.cover.ids.json")):
        back = tmp_path / f"{tag}.{name}.back"
        if name == "text" and not rec["text_exact"]:
            continue
        res = run_cli(main, ["decode", "--stego-file", str(stego), *args, "--out", str(back)])
        assert res.code == 0, res.output
        out[name] = back.read_bytes()
    return out


def test_cover_with_carriage_returns_survives_files(tmp_path, tiny_smoke):
    """A secret chosen so that its cover is ``"a\\r\\nb\\rc\\r"`` (built from the cover's ranks): the cover file
    holds exactly those bytes and decoding the file gives back the secret's bytes (0.2 read CR LF as LF)."""
    lm = tiny_smoke
    want = "a\r\nb\rc\r"
    ranks = token_ranks(lm, lm.encode_text(KEY), lm.encode_text(want))
    secret = lm.decode_ids(tokens_from_ranks(lm, lm.encode_text(PREFIX), ranks))
    got = _cli_round_trip(tmp_path, "tiny:smoke", secret, "cr")
    assert got["cover"] == want.encode() and got["record"]["text_exact"] is True
    assert got["text"] == got["ids"] == secret.encode()


def test_crlf_secrets_round_trip_through_files(tmp_path, tiny_smoke):
    """Random secrets with CR, CR LF, tabs and trailing spaces, byte for byte (the char LM is bijective)."""
    rng = random.Random(43)
    pieces = ["\r\n", "\r", "\n", "\t", "  ", "x = 1;", "Ab", "é€", "\x0b"]
    for k in range(2):
        secret = "".join(rng.choice(pieces) for _ in range(rng.randint(3, 8)))
        got = _cli_round_trip(tmp_path, "tiny:smoke", secret, f"s{k}")
        assert got["record"]["text_exact"] is True
        assert got["text"] == got["ids"] == secret.encode(), repr(secret)


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    """A random tiny gpt2 with the byte-level BPE tokenizer, saved as a model directory (``--model PATH``)."""
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import train_bpe

    tok = train_bpe(512)
    path = tmp_path_factory.mktemp("bpe_gpt2")
    tiny_model("gpt2", vocab_size=len(tok), n_positions=512).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_hostile_secrets_round_trip_through_files(tmp_path, bpe_dir, random_secret):
    """Property through files with a BPE model: every secret comes back byte-exactly from the ids file, and
    from the text file whenever the record says ``text_exact`` — which is what the written file re-tokenises
    to."""
    from iclr26_core.models import load_tokenizer

    tok = load_tokenizer(str(bpe_dir))
    rng = random.Random("files")
    for k in range(3):
        secret = random_secret(rng) + rng.choice(["\r\n", "\r", ""])
        got = _cli_round_trip(tmp_path, str(bpe_dir), secret, f"b{k}")
        rec = got["record"]
        written = got["cover"].decode("utf-8")
        ids = tok(written, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        assert rec["text_exact"] == (ids == rec["ids"])
        assert got["ids"] == secret.encode()
        if rec["text_exact"]:  # (a random model forces most hostile covers off the canonical path)
            assert got["text"] == secret.encode()


def test_secret_the_tokenizer_does_not_give_back_is_refused(tmp_path, bpe_dir):
    """An NFC normaliser turns "e\\u0301" into "é": encode refuses (or warns with lossy="warn"), the CLI
    answers in one line and writes nothing."""
    from tokenizers import normalizers

    from iclr26_core.models import load_causal_lm, load_tokenizer

    tok = copy.deepcopy(load_tokenizer(str(bpe_dir)))
    tok.backend_tokenizer.normalizer = normalizers.NFC()
    lm = HFRankLM(load_causal_lm(str(bpe_dir)), tok)
    with pytest.raises(CalgacusError, match="does not round-trip the secret: from character 3"):
        encode("cafe\u0301 au lait", KEY, lm, secret_prefix=PREFIX)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", CalgacusWarning)
        st = encode("cafe\u0301", KEY, lm, secret_prefix=PREFIX, transport="ids", lossy="warn")
    assert any("does not round-trip" in str(x.message) for x in w) and st.n_tokens > 0
    nfc_dir = tmp_path / "nfc"
    lm.model.save_pretrained(nfc_dir)
    tok.save_pretrained(nfc_dir)
    src = tmp_path / "secret.txt"
    src.write_bytes("cafe\u0301".encode())
    out = tmp_path / "cover.txt"
    res = run_cli(
        main, ["encode", "--secret-file", str(src), "--model", str(nfc_dir), "--key", KEY, "--out", str(out)]
    )
    assert_one_line_error(res, "does not round-trip the secret")
    assert not list(tmp_path.glob("cover.txt*"))
