"""Peers: the arithmetic-coding baseline (round trips; covers sample the model's distribution) and the
llama.cpp adapter (on a stand-in with llama-cpp-python's API, backed by a tiny transformers model)."""

import collections
import math
import random
import string
import warnings

import numpy as np
import pytest
import torch

from iclr26_calgacus import CharNGramLM, decode, encode
from iclr26_calgacus.arithmetic import _cuts, _shift, ac_decode, ac_encode
from iclr26_calgacus.llamacpp import LlamaCppRankLM
from iclr26_calgacus.protocol import CalgacusWarning
from iclr26_calgacus.ranks import CalgacusError


class FixedLM:
    """A context-free `RankLM` with fixed next-token probabilities (a closed form to sample against)."""

    name, start_ids, max_positions, bijective, special_ids = "fixed", [0], None, True, set()

    def __init__(self, probs):
        self.logits = torch.log(torch.tensor(probs, dtype=torch.float32))

    def session(self, ctx):
        lm = self

        class S:
            steps = 0

            def logits(self):
                return lm.logits

            def append(self, t):
                self.steps += 1

        return S()

    def admissible_mask(self):
        return torch.ones(len(self.logits), dtype=torch.bool)

    def encode_text(self, text):
        return [ord(c) - 97 for c in text]

    def decode_ids(self, ids):
        return "".join(chr(97 + i) for i in ids)


def test_cuts_and_shift_by_hand():
    lm = FixedLM([0.5, 0.25, 0.125, 0.125])
    tokens, cum = _cuts(
        lm.logits, lm.admissible_mask(), 17
    )  # floor(17p) = 8, 4, 2, 2; remainder 1 to the top
    assert tokens == [0, 1, 2, 3] and cum == [0, 9, 13, 15, 17]
    tokens, cum = _cuts(lm.logits, lm.admissible_mask(), 5)  # floor(5p) = 2, 1, 0, 0: two dropped
    assert tokens == [0, 1] and cum == [0, 4, 5]  # the remainder goes to the most likely token
    # low 0100 and high-1 0101 share 010; their last bits 0 and 1 become the leading bits, padded with 0s and 1s
    assert _shift(0b0100, 0b0110, 4) == (3, 0b0000, 0b10000)
    assert _shift(0b0111, 0b1001, 4) == (0, 0b0111, 0b1001)  # straddling: nothing fixed yet


@pytest.mark.parametrize("precision", [16, 32])
def test_round_trip_random_messages(precision):
    from iclr26_core.corpus import pydoc_text

    lm = CharNGramLM(order=3).fit([pydoc_text("train")[:20000]])
    rng = random.Random(precision)
    for n in [0, 1, 7, 40]:
        msg = rng.randbytes(n)
        st = ac_encode(msg, "The for statement", lm, precision=precision)
        assert ac_decode(st.ids, "The for statement", lm, precision=precision) == msg
        assert st.n_bits == 8 * n
    with pytest.raises(CalgacusError, match="ends before"):
        ac_decode(st.ids[:3], "The for statement", lm, precision=precision)


def test_covers_sample_the_model_distribution():
    """Random message bits turn into cover tokens distributed as the model says (chi-square), at ≈ the
    entropy in bits per token — the near-distribution-preserving property of arithmetic coding."""
    probs = [0.5, 0.3, 0.15, 0.05]
    lm = FixedLM(probs)
    st = ac_encode(random.Random(0).randbytes(600), "", lm)
    counts = collections.Counter(st.ids)
    n = len(st.ids)
    chi2 = sum((counts[i] - n * p) ** 2 / (n * p) for i, p in enumerate(probs))
    assert chi2 < 16.3  # 3 degrees of freedom, p = 0.001
    entropy = -sum(p * math.log2(p) for p in probs)
    assert abs(st.bits_per_token - entropy) < 0.05 * entropy
    assert ac_decode(st.ids, "", lm) == random.Random(0).randbytes(600)


class FakeLlama:
    """The slice of ``llama_cpp.Llama`` the adapter uses, over a tiny transformers llama: ``eval`` appends
    tokens to one KV cache and, as llama-cpp-python 0.3.36 does, writes ``scores[n_tokens - 1]`` only with
    ``logits_all=True``; tokenize/detokenize use bytes."""

    def __init__(self, model, tok, n_ctx=256, logits_all=True):
        self.model, self.tok, self._n_ctx, self._logits_all = model.eval(), tok, n_ctx, logits_all
        self.scores = np.zeros((n_ctx, len(tok)), dtype=np.float32)
        self.reset()

    def reset(self):
        self.n_tokens, self.cache = 0, None

    def eval(self, tokens):
        for t in tokens:
            with torch.inference_mode():
                out = self.model(input_ids=torch.tensor([[t]]), cache=self.cache, use_cache=True)
            self.cache = out.cache if "cache" in out else out.past_key_values
            if self._logits_all:
                self.scores[self.n_tokens] = out.logits[0, -1].float().numpy()
            self.n_tokens += 1

    def n_vocab(self):
        return len(self.tok)

    def n_ctx(self):
        return self._n_ctx

    def token_bos(self):
        return self.tok.bos_token_id

    def token_eos(self):
        return self.tok.eos_token_id

    def tokenize(self, data, add_bos=True, special=False):
        ids = self.tok(data.decode("utf-8"), add_special_tokens=False, split_special_tokens=not special)
        return ([self.token_bos()] if add_bos else []) + ids["input_ids"]

    def detokenize(self, ids, special=False):
        skip = set(self.tok.all_special_ids) if not special else set()
        return self.tok.decode([i for i in ids if i not in skip]).encode("utf-8")


@pytest.fixture(scope="module")
def fake_llama():
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import char_tokenizer

    tok = char_tokenizer(string.ascii_letters + " .,:\n")
    return FakeLlama(tiny_model("llama", vocab_size=len(tok), max_position_embeddings=256), tok)


def test_llamacpp_adapter_round_trip(fake_llama):
    lm = LlamaCppRankLM(fake_llama, name="fake")
    assert lm.special_ids >= {0, 1, 2} and not bool(lm.admissible_mask()[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalgacusWarning)  # a long-context model: no key warning
        st = encode("meet me at noon.", "the key:", lm, admissible="canonical")
        assert decode(st, "the key:", lm) == "meet me at noon."
    assert st.n_tokens == 16 and st.text_exact and lm.forward_calls > 2 * 16
    a, b = lm.session([5, 6]), lm.session([7])
    with pytest.raises(CalgacusError, match="interleave"):
        a.logits()
    assert b.logits().shape == (len(fake_llama.tok),)


def test_llamacpp_without_logits_all_is_refused(fake_llama):
    """llama-cpp-python 0.3 leaves ``scores`` at zero without logits_all: every rank would be a tie."""
    no_scores = FakeLlama(fake_llama.model, fake_llama.tok, logits_all=False)
    with pytest.raises(CalgacusError, match="logits_all=True"):
        LlamaCppRankLM(no_scores)


def test_llamacpp_missing_file_is_one_clear_error():
    with pytest.raises(CalgacusError, match="does not exist"):
        LlamaCppRankLM("/no/such/model.gguf")
