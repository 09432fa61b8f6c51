"""Tiny models, corpus, tokenizers."""

import pytest
import torch

from iclr26_core.corpus import encode_texts, lm_dataset, pydoc_dataset, pydoc_topics, token_blocks
from iclr26_core.errors import UserError
from iclr26_core.models import MODEL_NAMES, load_causal_lm, load_tokenizer, tiny_config, tiny_model
from iclr26_core.testing import odd_model
from iclr26_core.tokenizers import SPECIAL_TOKENS, char_tokenizer, train_bpe
from iclr26_core.tokenizers import load_tokenizer as load_tokenizer_dir


@pytest.mark.parametrize("name", ["gpt2", "gpt_neox", "llama", "mixtral", "olmoe"])
def test_causal_lms_forward(name):
    model = tiny_model(name)
    ids = torch.randint(0, 512, (2, 11))
    logits = model(input_ids=ids).logits
    assert logits.shape == (2, 11, 512) and torch.isfinite(logits).all()
    odd = odd_model(name)
    assert odd(input_ids=torch.randint(0, 99, (3, 7))).logits.shape == (3, 7, 99)


def test_vision_models_forward():
    vit = tiny_model("vit")
    assert vit(pixel_values=torch.randn(2, 3, 32, 32)).logits.shape == (2, 10)
    clip = tiny_model("clip")
    out = clip(input_ids=torch.randint(3, 512, (2, 9)), pixel_values=torch.randn(2, 3, 32, 32))
    assert out.logits_per_image.shape == (2, 2)


def test_tiny_model_is_seeded_and_sized():
    a, b = tiny_model("llama", seed=1), tiny_model("llama", seed=1)
    c = tiny_model("llama", seed=2)
    pa, pb, pc = (next(m.parameters()) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    assert tiny_config("llama", "small").hidden_size == 128
    assert set(MODEL_NAMES) == {"gpt2", "gpt_neox", "llama", "mixtral", "olmoe", "vit", "clip"}
    with pytest.raises(UserError, match="unknown tiny model"):
        tiny_model("bert")


def test_load_causal_lm(tmp_path, monkeypatch):
    model = tiny_model("gpt2")
    model.save_pretrained(tmp_path / "m")
    loaded = load_causal_lm(str(tmp_path / "m"))
    ids = torch.randint(0, 512, (1, 5))
    assert torch.allclose(model(input_ids=ids).logits, loaded(input_ids=ids).logits)
    with pytest.raises(UserError, match="does not exist"):
        load_causal_lm(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no config\.json"):
        load_causal_lm(str(tmp_path / "empty"))
    with pytest.raises(UserError, match="cannot load model"):
        load_causal_lm("no-such-org/no-such-model")
    assert load_causal_lm("tiny-llama").config.model_type == "llama"
    with pytest.raises(UserError, match="no tokenizer files"):
        load_tokenizer(str(tmp_path / "m"))  # a model directory without a tokenizer
    train_bpe(300, cache=False).save_pretrained(tmp_path / "m")
    assert len(load_tokenizer(str(tmp_path / "m"))) == 300


def test_corpus_splits_are_deterministic_and_disjoint():
    a, b = pydoc_dataset(), pydoc_dataset()
    assert a["train"]["topic"] == b["train"]["topic"]
    train, val = set(a["train"]["topic"]), set(a["validation"]["topic"])
    assert train and val and not train & val
    assert train | val == set(pydoc_topics())
    assert 0.03 < len(val) / (len(val) + len(train)) < 0.25
    assert set(pydoc_dataset(seed=1)["validation"]["topic"]) != val


def test_bpe_tokenizer_deterministic_roundtrip_and_cached(tmp_path):
    tok = train_bpe(300, cache=False)
    tok2 = train_bpe(300, cache=False)
    assert tok.get_vocab() == tok2.get_vocab() and len(tok) == 300
    assert [tok.convert_ids_to_tokens(i) for i in range(3)] == SPECIAL_TOKENS
    text = "def f(x):\n    return x ** 2  # ünïcode ✓"
    assert tok.decode(tok(text)["input_ids"]) == text
    tok.save_pretrained(tmp_path / "tok")
    assert load_tokenizer_dir(tmp_path / "tok")(text)["input_ids"] == tok(text)["input_ids"]
    cached = train_bpe(300)  # writes the cache (ICLR26_CACHE is a temp dir in tests)
    assert cached.get_vocab() == tok.get_vocab()
    assert train_bpe(300).get_vocab() == tok.get_vocab()  # read back from the cache


def test_char_tokenizer():
    tok = char_tokenizer("abc ")
    ids = tok("ab ca")["input_ids"]
    assert ids == [3, 4, 6, 5, 3]
    assert tok.decode(ids) == "ab ca"
    assert tok("az")["input_ids"] == [3, 2]  # unknown -> <unk>
    nl = char_tokenizer("a\n")
    assert nl("a\n\na")["input_ids"] == [3, 4, 4, 3]  # newlines are characters too
    assert nl.decode(nl("a\n\na")["input_ids"]) == "a\n\na"


def test_encode_texts_gives_the_tokenizers_own_ids(tmp_path):
    """The fast paths (character vocabulary, Rust backend) against the transformers call on the same texts."""
    import time

    texts = list(pydoc_topics().values())[:40]
    texts += ["tabs\tand\nnewlines\r\n", "unknown: ü€😀 and a literal <pad> and <|endoftext|>", ""]
    char = char_tokenizer("".join(sorted(set("".join(texts[:5])))))
    char.save_pretrained(tmp_path / "char")
    loaded = load_tokenizer_dir(tmp_path / "char")
    for tok in (char, loaded, train_bpe(300)):
        assert encode_texts(texts, tok) == tok(texts, add_special_tokens=False)["input_ids"]
    plain = [t for t in texts if "<" not in t]  # no special-token text: the character path itself
    assert encode_texts(plain, char) == char(plain, add_special_tokens=False)["input_ids"]
    # the character path is the fast one: the whole pydoc corpus in well under a second
    big = list(pydoc_topics().values())
    t0 = time.perf_counter()
    ids = encode_texts(big, char_tokenizer("".join(sorted(set("".join(big))))))
    assert time.perf_counter() - t0 < 3.0 and sum(map(len, ids)) == sum(map(len, big))


def test_token_blocks_and_lm_dataset():
    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz ")
    blocks = token_blocks(["abc", "de"], tok, seq_len=3)
    # "abc" + eos + "de" + eos = 7 ids -> 2 blocks of 3
    assert blocks.tolist() == [[3, 4, 5], [0, 6, 7]]
    with pytest.raises(ValueError):
        token_blocks(["a"], tok, seq_len=10)
    ds = lm_dataset(train_bpe(300), seq_len=64)
    assert ds["train"][0]["input_ids"].shape == (64,) and len(ds["validation"]) > 0
