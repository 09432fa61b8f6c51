"""The progressive cache: bit switches at the closed-form lengths over 1-token steps, budgets, FP equivalence,
generate() vs a manual decode loop (Llama and Qwen2 with GQA), the transformers Cache contract."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import Cache

from iclr26_core.errors import UserError
from iclr26_pmkvq import FixedBitsCache, KVBudgetError, ProgressiveQuantizedCache, mem_bytes
from iclr26_pmkvq.decoding import cache_kwarg, fp_logits, greedy, teacher_forced_logits


def _per_token(bits: int, kv: int = 2, d: int = 16, g: int = 16) -> int:
    # one token of one block: K and V, each head: packed codes + float16 range and zero per group
    return 2 * kv * (d * bits // 8 + 4 * d // g)


def test_mem_bytes_closed_form():
    assert mem_bytes(2, 10, 2, 16) == 10 * _per_token(2)
    assert mem_bytes(4, 7, 8, 128, count_scales=False) == 7 * 2 * 8 * 64  # the paper's b·d_kv·2·L/8


def test_bit_switches_on_single_token_steps_match_closed_form(tiny):
    model = tiny["llama"]()
    window, budget = 4, mem_bytes(2, 40, 2, 16)
    cache = ProgressiveQuantizedCache([budget, budget], window=window, n_sink=1)
    assert isinstance(cache, Cache)
    ids = torch.randint(3, 500, (1, 60), generator=torch.Generator().manual_seed(0))
    key = cache_kwarg(model)
    seen = []
    with torch.no_grad(), pytest.raises(KVBudgetError) as err:
        for t in range(60):
            model(input_ids=ids[:, t : t + 1], use_cache=True, **{key: cache})
            n = t + 1
            main = ((n - 1) // window) * window  # tokens flushed to the main cache (one sink token)
            fits = [b for b in (16, 8, 4, 2) if main * _per_token(b) <= budget]
            assert cache.get_seq_length() == n
            assert cache.layer_bits() == [fits[0]] * 2, f"step {n}"
            assert max(cache.memory_bytes()) <= budget
            seen.append(fits[0])
    # 16 bit up to 8 main tokens, 8 bit to 16, 4 bit to 24, 2 bit to 40; 44 main tokens need more than 2 bit
    assert [seen.index(b) + 1 for b in (8, 4, 2)] == [13, 21, 29]
    assert len(seen) == 44
    assert err.value.layer == 0 and err.value.needed == 44 * _per_token(2) and "block 0" in str(err.value)
    assert cache.bit_changes()[1] == [(13, 8), (21, 4), (29, 2)]


def test_prefill_shrinks_to_the_highest_bits_that_fit(tiny):
    model = tiny["llama"]()
    budget = mem_bytes(4, 32, 2, 16)
    cache = ProgressiveQuantizedCache([budget] * 2, window=4)
    with torch.no_grad():
        model(input_ids=torch.randint(3, 500, (1, 30)), use_cache=True, **{cache_kwarg(model): cache})
    assert cache.layer_bits() == [4, 4]  # 28 main tokens: 4 bit fits, 8 bit does not
    assert cache.overhead_bytes() == [2 * 2 * 2 * 16 * 2] * 2  # sink 1 + window 1 tokens, K and V, 2 heads


def test_budget_at_16_bit_gives_the_fp_logits(tiny):
    model = tiny["llama"]()
    ids = torch.randint(3, 500, (2, 48), generator=torch.Generator().manual_seed(1))
    big = mem_bytes(16, 64, 2, 16) * 1.0
    cache = ProgressiveQuantizedCache([big, big], window=8)
    got = teacher_forced_logits(model, ids, cache)
    assert cache.layer_bits() == [16, 16]
    assert (got - fp_logits(model, ids)).abs().max() < 1e-3


def test_progressive_beats_fixed_two_bit_at_the_same_budget(tiny):
    model = tiny["llama"]()
    ids = torch.randint(3, 500, (2, 64), generator=torch.Generator().manual_seed(2))
    ref = fp_logits(model, ids)
    budget = mem_bytes(2, 64, 2, 16)
    pm = ProgressiveQuantizedCache([budget] * 2, window=8)
    fixed = FixedBitsCache(2, window=8)
    err_pm = (teacher_forced_logits(model, ids, pm) - ref).square().mean()
    err_fixed = (teacher_forced_logits(model, ids, fixed) - ref).square().mean()
    assert pm.layer_bits() == fixed.layer_bits() == [2, 2]
    assert err_pm < err_fixed
    assert max(pm.memory_bytes()) <= 2 * budget  # batch of 2


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_generate_matches_a_manual_decode_loop(tiny, arch):
    model = tiny[arch]()
    prompt = torch.randint(3, 100, (2, 7), generator=torch.Generator().manual_seed(3))
    budget = mem_bytes(2, 40, 2, 16)
    out = greedy(model, prompt, 24, ProgressiveQuantizedCache([budget] * 2, window=4))
    cache, key, toks = ProgressiveQuantizedCache([budget] * 2, window=4), cache_kwarg(model), []
    with torch.no_grad():
        logits = model(input_ids=prompt, use_cache=True, **{key: cache}).logits
        for _ in range(24):
            last = logits[:, -1].clone()
            last[:, model.config.eos_token_id] = float("-inf")  # greedy() asks for exactly 24 new tokens
            nxt = last.argmax(-1, keepdim=True)
            toks.append(nxt)
            logits = model(input_ids=nxt, use_cache=True, **{key: cache}).logits
    assert torch.equal(out, torch.cat(toks, 1))
    assert cache.get_seq_length() == 7 + 24 and cache.layer_bits() == [2, 2]  # 28 main tokens: 4 bit > budget


def test_fixed_bits_cache_per_block_and_bad_input(tiny):
    model = tiny["llama"]()
    cache = FixedBitsCache([4, 2], window=4)
    with torch.no_grad():
        model(input_ids=torch.randint(3, 500, (1, 20)), use_cache=True, **{cache_kwarg(model): cache})
    assert cache.layer_bits() == [4, 2]
    assert cache.memory_bytes() == [16 * _per_token(4), 16 * _per_token(2)]
    with pytest.raises(UserError, match="bits must be one of 16, 8, 4, 2"):
        FixedBitsCache(3)
    with pytest.raises(UserError, match="> 0 bytes"):
        ProgressiveQuantizedCache([100, 0])
    with pytest.raises(UserError, match="divisor of head_dim 16"):
        c = ProgressiveQuantizedCache([1e9, 1e9], group_size=5)
        model(input_ids=torch.randint(3, 500, (1, 4)), use_cache=True, **{cache_kwarg(model): c})
