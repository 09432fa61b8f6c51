"""The measurements behind the claims (called by `reproduce`); each returns plain numbers.

* `ers_chain` (C1): 16 → 8 → 4 → 2 by ERS vs direct float64 quantisation, and vs the naive shift chain.
* `progressive_vs_fixed` (C2): teacher-forced KL of PM-KVQ and of the fixed-bit cache at the same budget.
* `planted_allocation` (C3): sensitivity + allocation on a model with one block made sensitive.
* `pi_key_statistics` (C4): per-channel RMS of post-RoPE keys from short, PI and long calibration.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from typing import Any

import numpy as np
import torch

from .allocation import allocate_memory
from .arch import capture_qkv, check_supported
from .cache import FixedBitsCache, ProgressiveQuantizedCache, mem_bytes
from .decoding import agreement, flush_aligned_logits, fp_logits, greedy, kl_per_step
from .kivi import KIVICache
from .quantizer import naive_right_shift, quantize_groups
from .reparam import calibrate_reparameterization
from .sensitivity import kv_sensitivity


# -------------------------------------------------------------------------------------------------- C1
def ers_chain(n_groups: int, group_size: int, seed: int) -> dict[str, Any]:
    """Gaussian groups quantised at 16 bit, shrunk by ERS (and by the naive shift) to 8, 4, 2 bits."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_groups, group_size, generator=gen)
    x64 = x.double().numpy()
    lo, hi = x64.min(1, keepdims=True), x64.max(1, keepdims=True)
    q16 = quantize_groups(x, 16, group_size)
    ers, naive = q16, q16.codes
    out: dict[str, Any] = {
        "equal_fraction": {},
        "mismatches": {},
        "mse_ers": {},
        "mse_naive": {},
        "ratio": {},
    }
    for b in (8, 4, 2):
        ers = ers.shrink()
        naive = naive_right_shift(naive, b)
        # float64 reference, computed here with numpy (independent of the package's quantiser)
        direct = np.clip(np.round((x64 - lo) / ((hi - lo) / (2**b - 1))), 0, 2**b - 1)
        codes = ers.codes.numpy()
        out["equal_fraction"][b] = float((codes == direct).mean())
        out["mismatches"][b] = int((codes != direct).sum())
        s_naive = (q16.scale.double() * 2 ** (16 - b)).repeat_interleave(group_size, -1)
        x_naive = naive.double() * s_naive - q16.zero.double().repeat_interleave(group_size, -1)
        out["mse_ers"][b] = float((ers.dequantize().double() - x.double()).square().mean())
        out["mse_naive"][b] = float((x_naive - x.double()).square().mean())
        out["ratio"][b] = out["mse_naive"][b] / out["mse_ers"][b]
    return out


# -------------------------------------------------------------------------------------------------- C2
def _peak(trace: list[list[tuple[int, int, int]]]) -> list[int]:
    return [max((b for _, _, b in tr), default=0) for tr in trace]


def c2_caches(shape: Any, c: Any) -> tuple[int, dict[str, Any]]:
    """(budget bytes per block, {name: factory}) for PM-KVQ at Mem(budget_bits) per block and the fixed-bit and
    KIVI caches at budget_bits: the same bytes per token (KIVI keys grouped over head_dim tokens)."""
    g = shape.head_dim if c.group_size is None else int(c.group_size)
    bits = int(c.budget_bits)
    budget = mem_bytes(bits, int(c.max_len), shape.n_kv_heads, shape.head_dim, g)
    kw = dict(n_sink=int(c.n_sink), window=int(c.window), group_size=g)
    return budget, {
        "pm-kvq": lambda: ProgressiveQuantizedCache([budget] * shape.n_layers, **kw),
        f"fixed-{bits}bit": lambda: FixedBitsCache(bits, **kw),
        f"kivi-{bits}bit": lambda: KIVICache(bits, key_group=g, **kw),
    }


def c2_verdict(mean_kl: dict[str, float], bits: int) -> tuple[str, float, bool]:
    """(the stronger baseline, KL(PM-KVQ) / its KL, ratio <= 0.8): the stronger of fixed and KIVI at ``bits``."""
    base = min((f"fixed-{bits}bit", f"kivi-{bits}bit"), key=lambda k: mean_kl[k])
    ratio = mean_kl["pm-kvq"] / mean_kl[base] if mean_kl[base] > 0 else float("inf")
    return base, ratio, ratio <= 0.8


def progressive_vs_fixed(model: Any, texts: torch.Tensor, c: Any, ctx: Any) -> dict[str, Any]:
    """KL per step of PM-KVQ (budget = Mem(budget_bits) at max_len per block), FixedBitsCache(budget_bits) and
    KIVICache(budget_bits), teacher-forced on ``texts``."""
    shape = check_supported(model)
    budget, makers = c2_caches(shape, c)
    ref = fp_logits(model, texts)
    caches = {name: make() for name, make in makers.items()}
    res: dict[str, Any] = {"budget_bytes_per_block": budget, "batch": len(texts), "kl": {}, "peak_bytes": {}}
    for name, cache in caches.items():
        logits = flush_aligned_logits(
            model, texts, cache, progress=lambda s, n=name: ctx.progress(s, desc=f"C2 {n}")
        )
        res["kl"][name] = kl_per_step(ref, logits).tolist()
        res["peak_bytes"][name] = _peak(cache.trace)
    pm = caches["pm-kvq"]
    limit = budget * len(texts)
    res["within_budget"] = all(b <= limit for tr in pm.trace for _, _, b in tr)
    res["bit_changes"] = pm.bit_changes()
    res["trace"] = pm.trace
    res["overhead_bytes"] = pm.overhead_bytes()
    res["mean_kl"] = {k: float(np.mean(v)) for k, v in res["kl"].items()}
    # greedy continuations (no verdict): agreement with the FP cache
    prompt, new = texts[:, : int(c.greedy_prompt)], int(c.greedy_new)
    fp_cont = greedy(model, prompt, new)
    res["greedy_agreement"] = {
        name: agreement(fp_cont, greedy(model, prompt, new, make())) for name, make in makers.items()
    }
    res["_ref"] = ref
    return res


def peer_rows(
    model: Any, texts: torch.Tensor, ref: torch.Tensor, c: Any, nbits: list[int], ctx: Any
) -> list[dict]:
    """transformers' QuantizedCache (quanto) at each of ``nbits``: mean KL vs FP and peak bytes, same texts."""
    from .peers import quanto_bytes, quanto_cache

    shape = check_supported(model)
    rows = []
    for b in nbits:
        cache = quanto_cache(model, int(b), int(c.window), shape.head_dim)
        logits = flush_aligned_logits(
            model, texts, cache, progress=lambda s, b=b: ctx.progress(s, desc=f"peer quanto {b}bit")
        )
        kl = kl_per_step(ref, logits)
        rows.append(
            {
                "method": f"transformers QuantizedCache quanto {b}bit",
                "mean_kl": float(kl.mean()),
                "kl": kl.tolist(),
                "peak_bytes": quanto_bytes(cache),
            }
        )
    return rows


# -------------------------------------------------------------------------------------------------- C3
def planted_allocation(
    model: Any, calib: torch.Tensor, texts: torch.Tensor, c: Any, seed: int, ctx: Any
) -> dict:
    """Scale one block's k_proj by ``k_scale``; allocate ``bit_choices`` at a budget of ``n_high`` high blocks;
    mean KL of the allocator's choice and of every allocation with the same budget."""
    shape = check_supported(model)
    planted = random.Random(seed).randrange(shape.n_layers)
    m = copy.deepcopy(model)
    with torch.no_grad():
        attn = m.model.layers[planted].self_attn
        attn.k_proj.weight.mul_(float(c.k_scale))
        if attn.k_proj.bias is not None:
            attn.k_proj.bias.mul_(float(c.k_scale))
    lo, hi = min(c.bit_choices), max(c.bit_choices)
    choices = sorted(int(b) for b in c.bit_choices)
    dims = dict(n_kv_heads=shape.n_kv_heads, head_dim=shape.head_dim)

    def block_mem(b: int) -> int:
        return mem_bytes(b, int(c.max_len), **dims)

    n_high = int(c.n_high)
    budget = n_high * block_mem(hi) + (shape.n_layers - n_high) * block_mem(lo)
    sens = kv_sensitivity(m, [calib], choices, effective_len=c.get("effective_len"))
    bits = allocate_memory(sens, choices, budget, max_len=int(c.max_len), **dims)
    ref = fp_logits(m, texts)
    combos = [
        [hi if i in high else lo for i in range(shape.n_layers)]
        for high in itertools.combinations(range(shape.n_layers), n_high)
    ]
    if bits not in combos:
        combos.append(bits)
    kl = {}
    for combo in ctx.progress(combos, desc=f"C3 seed {seed} allocations"):
        cache = FixedBitsCache(combo, n_sink=int(c.n_sink), window=int(c.window))
        kl[str(combo)] = float(kl_per_step(ref, flush_aligned_logits(m, texts, cache)).mean())
    equal = [kl[str(cb)] for cb in combos if sum(map(block_mem, cb)) == budget]
    return {
        "planted": planted,
        "bits": bits,
        "planted_bits": bits[planted],
        "sensitivity": sens.tolist(),
        "budget_bytes": budget,
        "kl": kl,
        "kl_allocator": kl[str(bits)],
        "kl_mean_equal_budget": float(np.mean(equal)),
        "kl_best": min(kl.values()),
    }


# -------------------------------------------------------------------------------------------------- C4
def band_pairs(head_dim: int, rope_theta: float, short: int, long: int) -> list[int]:
    """RoPE pairs j whose period 2π/θ_j (θ_j = theta^(−2j/d)) lies in (short, long]."""
    out = []
    for j in range(head_dim // 2):
        period = 2 * math.pi * rope_theta ** (2 * j / head_dim)
        if short < period <= long:
            out.append(j)
    return out


def _rms(qkv: list[tuple]) -> torch.Tensor:
    return torch.stack([k.double().square().mean(dim=(0, 2)).sqrt() for _, k, _ in qkv])  # [L, Hkv, D]


def _logit_mse(
    q: torch.Tensor, k: torch.Tensor, lam: torch.Tensor | None, bits: int, scaling: float, n_query: int
) -> float:
    """MSE of attention logits of the last ``n_query`` queries against all keys when keys are quantised
    (after dividing by λ, queries multiplied by λ)."""
    rep = q.shape[1] // k.shape[1]
    lam = torch.ones_like(k[0, :, :1, :]) if lam is None else lam[:, None, :].to(k)
    kq = quantize_groups(k / lam, bits).dequantize() * 1.0
    qs = q[:, :, -n_query:]
    ref = qs @ k.repeat_interleave(rep, 1).transpose(-1, -2) * scaling
    got = (qs * lam.repeat_interleave(rep, 0)) @ kq.repeat_interleave(rep, 1).transpose(-1, -2) * scaling
    return float((got - ref).square().mean())


def pi_key_statistics(model: Any, ids: torch.Tensor, c: Any) -> dict[str, Any]:
    """Relative error of per-channel RMS of post-RoPE keys (band pairs) from T tokens at positions 0..T−1 and
    at PI positions 0, s, …, against ``ids`` at positions 0..len−1; plus 4-bit logit MSE at long positions."""
    shape = check_supported(model)
    t, long = int(c.calib_len), ids.shape[1]
    eff = t * int(c.stride)
    truth = capture_qkv(model, ids)
    short = capture_qkv(model, ids[:, :t])
    pi = capture_qkv(model, ids[:, :t], eff)
    pairs = band_pairs(shape.head_dim, float(c.model.rope_theta), t, long)
    chans = pairs + [j + shape.head_dim // 2 for j in pairs]
    r_true = _rms(truth)[..., chans]
    err = {
        name: float(((_rms(q)[..., chans] - r_true).abs() / r_true).mean())
        for name, q in (("short", short), ("pi", pi))
    }
    calib = [ids[:, :t]]
    reps = {
        "short": calibrate_reparameterization(model, calib, effective_len=None, grid=int(c.grid)),
        "pi": calibrate_reparameterization(model, calib, effective_len=eff, grid=int(c.grid)),
    }
    n_query = long // 4
    logit = {
        "no-reparam": float(
            np.mean([_logit_mse(q, k, None, int(c.logit_bits), shape.scaling, n_query) for q, k, _ in truth])
        )
    }
    for name, rep in reps.items():
        logit[name] = float(
            np.mean(
                [
                    _logit_mse(q, k, lam, int(c.logit_bits), shape.scaling, n_query)
                    for (q, k, _), lam in zip(truth, rep.lambdas)
                ]
            )
        )
    return {
        "band_pairs": pairs,
        "rms_error": err,
        "logit_mse": logit,
        "alphas": {k: r.alphas for k, r in reps.items()},
    }
