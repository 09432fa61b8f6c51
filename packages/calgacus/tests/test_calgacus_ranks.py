"""The rank primitives against brute force, and the inverse property on real models."""

import random

import pytest
import torch

from iclr26_calgacus.ngram import CharNGramLM
from iclr26_calgacus.ranks import (
    CalgacusError,
    rank_of,
    token_at_rank,
    token_at_rank_ex,
    token_ranks,
    tokens_from_ranks,
)


def brute_rank(logits, v, mask):
    # an independent definition: position of v in a sorted list of (-logit, id) over admissible ids
    order = sorted((-float(logits[u]), u) for u in range(len(logits)) if mask[u])
    return 1 + order.index((-float(logits[v]), v))


@pytest.mark.parametrize("seed", range(5))
def test_rank_matches_brute_force_with_ties(seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randint(0, 6, (40,), generator=g).float()  # many exact ties
    mask = torch.rand(40, generator=g) > 0.2
    for v in torch.nonzero(mask).flatten().tolist():
        r = rank_of(logits, v, mask)
        assert r == brute_rank(logits, v, mask)
        assert token_at_rank(logits, r, mask) == v
        # the lazy filtered path with an accept-all filter gives the same ranks
        assert rank_of(logits, v, mask, accept=lambda u: True) == r
        assert token_at_rank(logits, r, mask, accept=lambda u: True) == v


def test_filtered_ranks_are_a_permutation_accepted_first():
    logits = torch.tensor([3.0, 2.0, 2.0, 1.0, 0.0])
    mask = torch.ones(5, dtype=torch.bool)
    odd = lambda u: u % 2 == 1  # noqa: E731
    # accepted by logit (1, 3), then rejected by logit (0, 2, 4): no rank overflows
    assert [token_at_rank(logits, r, mask, odd) for r in range(1, 6)] == [1, 3, 0, 2, 4]
    assert [rank_of(logits, v, mask, odd) for v in range(5)] == [3, 1, 4, 2, 5]
    assert token_at_rank_ex(logits, 2, mask, odd) == (3, True)
    assert token_at_rank_ex(logits, 3, mask, odd) == (0, False)
    with pytest.raises(CalgacusError, match="exceeds"):
        token_at_rank(logits, 6, mask, odd)


class _Batched:
    """A filter offering the batched ``many`` path, counting its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, v):
        return self.fn(v)

    def many(self, vs):
        self.calls += 1
        return [self.fn(v) for v in vs]


@pytest.mark.parametrize("seed", range(6))
def test_filtered_permutation_matches_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    n = 150  # > one chunk of the lazy classifier
    logits = torch.randint(0, 8, (n,), generator=g).float()  # exact ties
    mask = torch.rand(n, generator=g) > 0.1
    keep = set(torch.nonzero(torch.rand(n, generator=g) > 0.6).flatten().tolist())
    accept = _Batched(lambda u: u in keep)
    # independent definition: sort admissible ids by (rejected?, -logit, id)
    perm = sorted((u not in keep, -float(logits[u]), u) for u in range(n) if mask[u])
    perm = [u for _, _, u in perm]
    for r, v in enumerate(perm, 1):
        assert rank_of(logits, v, mask, accept) == r
        assert token_at_rank(logits, r, mask, accept) == v
        assert token_at_rank(logits, r, mask, lambda u: u in keep) == v  # the per-candidate path
    assert accept.calls > 0


def test_inadmissible_token_and_bad_rank():
    logits = torch.zeros(4)
    mask = torch.tensor([True, False, True, True])
    with pytest.raises(CalgacusError):
        rank_of(logits, 1, mask)
    with pytest.raises(CalgacusError):
        token_at_rank(logits, 4, mask)
    with pytest.raises(CalgacusError):
        token_at_rank(logits, 0, mask)


def test_inverse_on_random_gpt2():
    from iclr26_calgacus.hf import HFRankLM
    from iclr26_core.testing import odd_model
    from iclr26_core.tokenizers import char_tokenizer

    tok = char_tokenizer("abcdefghijklmnopqrstuvwxyz .,\n")
    model = odd_model("gpt2", vocab_size=len(tok))
    lm = HFRankLM(model, tok)
    rng = random.Random(0)
    adm = torch.nonzero(lm.admissible_mask()).flatten().tolist()
    x = [rng.choice(adm) for _ in range(25)]
    ranks = token_ranks(lm, [5, 6, 7], x)
    assert tokens_from_ranks(lm, [5, 6, 7], ranks) == x
    assert all(1 <= r <= len(adm) for r in ranks)


def test_inverse_on_ngram():
    lm = CharNGramLM(order=3).fit(["the cat sat on the mat", "a dog ate the hat"])
    rng = random.Random(1)
    x = [rng.randrange(lm.vocab_size) for _ in range(40)]
    ranks = token_ranks(lm, lm.encode_text("the "), x)
    assert tokens_from_ranks(lm, lm.encode_text("the "), ranks) == x


def test_incremental_logits_are_bitwise_reproducible():
    from iclr26_calgacus.hf import HFRankLM
    from iclr26_core.models import tiny_model
    from iclr26_core.tokenizers import char_tokenizer

    tok = char_tokenizer("abcdefgh ")
    lm = HFRankLM(tiny_model("llama", vocab_size=len(tok)), tok)
    runs = []
    for _ in range(2):
        lm.clear_prompt_cache()
        s = lm.session([3, 4, 5])
        out = [s.logits().clone()]
        for t in [6, 7, 8, 9]:
            s.append(t)
            out.append(s.logits().clone())
        runs.append(torch.stack(out))
    # and through the prompt-state reuse path
    s = lm.session([3, 4, 5])
    reused = [s.logits().clone()]
    for t in [6, 7, 8, 9]:
        s.append(t)
        reused.append(s.logits().clone())
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0], torch.stack(reused))
