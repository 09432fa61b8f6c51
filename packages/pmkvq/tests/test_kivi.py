"""Quantisation is for storage only (prefill = FP logits; a decode step = attention on the stored codes plus
the current token in FP), and KIVI's layout (keys per channel over tokens, values per token) at equal bytes."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicCache

from iclr26_core.errors import UserError
from iclr26_pmkvq import FixedBitsCache, KIVICache, ProgressiveQuantizedCache, mem_bytes
from iclr26_pmkvq.decoding import cache_kwarg, fp_logits, kl_per_step
from iclr26_pmkvq.quantizer import fake_quantize


def _strong(model):
    with torch.no_grad():  # large weights: attention is peaked, so 2-bit KV errors are large when they happen
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8)
            layer.self_attn.k_proj.weight.mul_(8)
    return model


@pytest.mark.parametrize(
    "make",
    [
        lambda: FixedBitsCache(2, window=8),
        lambda: KIVICache(2, window=16),
        lambda: ProgressiveQuantizedCache([mem_bytes(2, 64, 2, 16)] * 2, window=8),
    ],
    ids=["fixed", "kivi", "progressive"],
)
def test_prefill_gives_the_full_precision_logits(tiny, make):
    model = _strong(tiny["llama"]())
    ids = torch.randint(3, 500, (2, 60), generator=torch.Generator().manual_seed(0))
    cache = make()
    with torch.no_grad():
        got = model(input_ids=ids, use_cache=True, **{cache_kwarg(model): cache}).logits.float()
    assert cache.layer_bits() == [2, 2] and max(cache.memory_bytes()) > 0  # the prompt was stored at 2 bit
    assert float(kl_per_step(fp_logits(model, ids), got).max()) < 1e-9


def _quantised_dynamic(model, ids, quantise):
    """An FP prefill into a DynamicCache whose stored K/V are then replaced by quantise(K), quantise(V)."""
    dyn = DynamicCache()
    with torch.no_grad():
        model(input_ids=ids, use_cache=True, **{cache_kwarg(model): dyn})
    for layer in dyn.layers:
        layer.keys, layer.values = quantise(layer.keys, "k"), quantise(layer.values, "v")
    return dyn


def _per_channel(x, bits, g):  # independent KIVI key quantiser: loops over chunks of g tokens and channels
    out = x.clone()
    for a in range(0, x.shape[-2], g):
        chunk = x[..., a : a + g, :].double()
        lo, hi = chunk.amin(-2, keepdim=True), chunk.amax(-2, keepdim=True)
        s = torch.where(hi > lo, (hi - lo) / (2**bits - 1), torch.ones_like(hi))
        q = torch.round((chunk - lo) / s).clamp(0, 2**bits - 1)
        # float16 storage of range and zero, as the cache stores them
        rng, zero = (hi - lo).half().double(), (-lo).half().double()
        out[..., a : a + g, :] = (q * rng / (2**bits - 1) - zero).to(x.dtype)
    return out


@pytest.mark.parametrize("kind", ["fixed", "kivi"])
def test_a_decode_step_attends_to_the_stored_codes_and_its_own_token_in_fp(tiny, kind):
    model = _strong(tiny["llama"]())
    ids = torch.randint(3, 500, (1, 33), generator=torch.Generator().manual_seed(1))
    prompt, nxt = ids[:, :32], ids[:, 32:]
    key = cache_kwarg(model)
    # window 16, no sink: the 32-token prompt is stored entirely in the main cache at 4 bit
    cache = FixedBitsCache(4, window=16, n_sink=0) if kind == "fixed" else KIVICache(4, window=16, n_sink=0)
    with torch.no_grad():
        model(input_ids=prompt, use_cache=True, **{key: cache})
        got = model(input_ids=nxt, use_cache=True, **{key: cache}).logits

    def quantise(x, which):
        if kind == "kivi" and which == "k":
            return _per_channel(x, 4, 16)
        return fake_quantize(x, 4, 16)

    dyn = _quantised_dynamic(model, prompt, quantise)
    with torch.no_grad():
        want = model(input_ids=nxt, use_cache=True, **{key: dyn}).logits
    assert (got - want).abs().max() < 1e-4


def test_kivi_bytes_equal_pm_kvq_bytes_and_its_errors_differ(tiny):
    model = _strong(tiny["llama"]())
    ids = torch.randint(3, 500, (2, 49), generator=torch.Generator().manual_seed(2))
    key = cache_kwarg(model)
    kivi, fixed = KIVICache(2, window=16), FixedBitsCache(2, window=16)
    with torch.no_grad():
        for c in (kivi, fixed):
            model(input_ids=ids, use_cache=True, **{key: c})
    assert kivi.memory_bytes() == fixed.memory_bytes() == [2 * 48 * 2 * 2 * (16 * 2 // 8 + 4)] * 2
    k_kivi, _ = kivi.layers[0].states()
    k_fixed, _ = fixed.layers[0].states()
    assert not torch.allclose(k_kivi, k_fixed)


def test_kivi_window_must_hold_whole_key_groups(tiny):
    model = tiny["llama"]()
    with pytest.raises(UserError, match="multiple of key_group 16"):
        model(
            input_ids=torch.randint(3, 500, (1, 4)),
            use_cache=True,
            **{cache_kwarg(model): KIVICache(2, window=8)},
        )


@pytest.mark.parametrize("kind", ["fixed", "kivi", "progressive", "quanto"])
def test_flush_aligned_forwards_equal_one_token_decoding(tiny, kind):
    from iclr26_pmkvq.decoding import flush_aligned_logits, teacher_forced_logits

    model = _strong(tiny["llama"]())
    ids = torch.randint(3, 500, (2, 75), generator=torch.Generator().manual_seed(4))

    def make():
        if kind == "quanto":
            pytest.importorskip("optimum.quanto")
            from iclr26_pmkvq.peers import quanto_cache

            return quanto_cache(model, 2, 8, 16)
        if kind == "kivi":
            return KIVICache(2, window=16)
        if kind == "fixed":
            return FixedBitsCache(4, window=8)
        return ProgressiveQuantizedCache(
            [mem_bytes(2, 75, 2, 16)] * 2, window=8
        )  # 16 -> 8 -> 4 -> 2 on the way

    step, fast = make(), make()
    want = teacher_forced_logits(model, ids, step, prefill=13)
    got = flush_aligned_logits(model, ids, fast, prefill=13)
    # float32 sums in another order move a key by ~1e-7, which can flip a 2-bit code at a rounding boundary
    assert (got - want).abs().max() < 1e-3 and (got - want).abs().mean() < 1e-6
    if kind == "progressive":
        assert fast.bit_changes() == step.bit_changes() and fast.layer_bits() == [2, 2]
        # from an empty cache without a prefill: the sink token first, then the window's flush points
        again = flush_aligned_logits(model, ids, make())
        assert (again - teacher_forced_logits(model, ids, make())).abs().mean() < 1e-6
