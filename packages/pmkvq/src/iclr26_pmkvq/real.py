"""``reproduce scale=real``: PM-KVQ on SmolLM2-135M-Instruct generating long answers to real prompts.

1. Prompts: real paragraphs of Python's documentation (`iclr26_core.pretrained.real_text("test")`), each cut to
   ``prompt_tokens`` tokens and wrapped in the model's chat template with an instruction; all prompts have the
   same length (one batch, no padding).
2. One generation with the full-precision cache: ``new_tokens`` tokens (EOS suppressed), sampled at the paper's
   T = 0.6, top-p 0.95 with a fixed seed.
3. Every cache is scored on that continuation, teacher-forced (`decoding.flush_aligned_logits`: exactly the
   logits of decoding it token by token): KL(FP ‖ cache) per generated position and the perplexity of the
   continuation. The memory budget is per block and sequence, for ``max_len`` = prompt + new tokens.
4. Calibration (PI positions, reparameterisation, sensitivities) only on ``real_text("calib")``.

C2 at the 2-bit budget (Mem(2) at max_len per block): PM-KVQ's progressive cache vs fixed 2-bit and KIVI 2-bit
(equal bytes), plus PM-KVQ's whole pipeline (reparameterised, allocated) and transformers' ``QuantizedCache``.
C3 at the 3-bit budget (half the blocks at 4 bit, half at 2): the allocator's bits vs random allocations of the
same bytes (each with `FixedBitsCache`, isolating the allocation), plus the whole pipeline at that budget.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any

import numpy as np
import torch

from .arch import check_supported
from .cache import FixedBitsCache, mem_bytes
from .decoding import flush_aligned_logits, fp_logits, kl_per_step
from .experiments import c2_caches
from .kivi import ProgressiveKIVICache
from .pipeline import MIB, pm_kvq


def load_smollm2() -> tuple[Any, Any]:
    from iclr26_core.pretrained import load_smollm2 as load

    model, tok = load(dtype=torch.float32)
    return model.eval(), tok


def chat_prompts(
    tok: Any, paragraphs: list[str], n: int, prompt_tokens: int, instruction: str
) -> torch.Tensor:
    """[n, P] token ids: the chat template around ``instruction`` + the first ``prompt_tokens`` tokens of each of
    the first ``n`` paragraphs that have that many (same P for all: template pieces tokenised once)."""
    mark = "\u2063"  # a placeholder for the paragraph inside the rendered template
    text = tok.apply_chat_template(
        [{"role": "user", "content": f"{instruction}\n\n{mark}"}], tokenize=False, add_generation_prompt=True
    )
    head, tail = text.split(mark)
    head_ids = tok(head, add_special_tokens=False)["input_ids"]
    tail_ids = tok(tail, add_special_tokens=False)["input_ids"]
    rows = []
    for p in paragraphs:
        ids = tok(p, add_special_tokens=False)["input_ids"]
        if len(ids) >= prompt_tokens:
            rows.append(head_ids + ids[:prompt_tokens] + tail_ids)
        if len(rows) == n:
            return torch.tensor(rows)
    from iclr26_core.errors import UserError

    raise UserError(f"only {len(rows)} test paragraphs have {prompt_tokens} tokens; lower real.prompt_tokens")


def calib_batches(tok: Any, paragraphs: list[str], n: int, length: int) -> list[torch.Tensor]:
    ids = tok("\n\n".join(paragraphs), add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    if len(ids) < n * length:
        from iclr26_core.errors import UserError

        raise UserError(f"the calibration text has {len(ids)} tokens, fewer than {n} x {length}")
    return [ids[i * length : (i + 1) * length][None] for i in range(n)]


@torch.no_grad()
def sample(model: Any, prompts: torch.Tensor, c: Any, seed: int, cache: Any = None) -> torch.Tensor:
    """``c.new_tokens`` sampled tokens per prompt (EOS suppressed) with the FP cache or ``cache``."""
    from .decoding import cache_kwarg

    torch.manual_seed(seed)
    kw = {} if cache is None else {cache_kwarg(model): cache}
    out = model.generate(
        input_ids=prompts,
        attention_mask=torch.ones_like(prompts),
        max_new_tokens=int(c.new_tokens),
        min_new_tokens=int(c.new_tokens),
        do_sample=True,
        temperature=float(c.temperature),
        top_p=float(c.top_p),
        top_k=0,
        pad_token_id=model.config.eos_token_id,
        **kw,
    )
    return out[:, prompts.shape[1] :]


def score(model: Any, ids: torch.Tensor, p: int, ref: torch.Tensor, cache: Any) -> dict[str, Any]:
    """KL per generated position (mean over the batch) and perplexity of the continuation under ``cache``."""
    logits = flush_aligned_logits(model, ids, cache, prefill=p)
    return {"kl": kl_per_step(ref[:, p - 1 : -1], logits[:, p - 1 : -1]).tolist(), "ppl": ppl(logits, ids, p)}


def ppl(logits: torch.Tensor, ids: torch.Tensor, p: int) -> float:
    """exp(mean cross-entropy) of the tokens after position p − 1 (the generated continuation)."""
    ce = torch.nn.functional.cross_entropy(logits[:, p - 1 : -1].flatten(0, 1).double(), ids[:, p:].flatten())
    return float(ce.exp())


def peak(cache: Any) -> int:
    """The largest main-cache bytes of any block over the run (whole batch)."""
    return max(max((b for _, _, b in tr), default=0) for tr in cache.trace)


def random_allocations(n_layers: int, n_high: int, lo: int, hi: int, k: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        high = set(rng.choice(n_layers, n_high, replace=False).tolist())
        out.append([hi if i in high else lo for i in range(n_layers)])
    return out


def run_real(cfg: Any, ctx: Any) -> dict[str, Any]:
    """All the measurements of scale=real (plain numbers, figures drawn by `reproduce`)."""
    from iclr26_core.pretrained import real_text

    c = cfg.real
    t0 = time.process_time()
    model, tok = load_smollm2()
    shape = check_supported(model)
    prompts = chat_prompts(tok, real_text("test"), int(c.n_prompts), int(c.prompt_tokens), str(c.instruction))
    p, n_new = prompts.shape[1], int(c.new_tokens)
    max_len = p + n_new
    ctx.log(f"SmolLM2-135M-Instruct: {len(prompts)} prompts of {p} tokens, {n_new} new tokens each")
    new = sample(model, prompts, c, int(cfg.seed))
    ids = torch.cat([prompts, new], 1)
    ref = fp_logits(model, ids)
    res: dict[str, Any] = {"prompt_tokens": p, "max_len": max_len, "batch": len(ids), "arms": {}}
    res["fp_ppl"] = ppl(ref, ids, p)
    res["seconds_generation"] = time.process_time() - t0

    def arm(name: str, cache: Any, on: Any = model) -> None:
        r = score(on, ids, p, ref, cache)
        r |= {
            "mean_kl": float(np.mean(r["kl"])),
            "peak_bytes": peak(cache) if hasattr(cache, "trace") else None,
        }
        res["arms"][name] = r
        ctx.log(f"  {name:<32} mean KL {r['mean_kl']:.4g}  PPL {r['ppl']:.3f}")

    dims = dict(n_kv_heads=shape.n_kv_heads, head_dim=shape.head_dim)
    kw = dict(n_sink=int(c.n_sink), window=int(c.window))
    # ---- C2 at the 2-bit budget: the in-package caches at equal bytes (as scale=cpu), then the peers
    c2 = dict(budget_bits=int(c.budget_bits), max_len=max_len, group_size=None, **kw)
    budget2, makers = c2_caches(shape, _Cfg(c2))
    res["budget_bytes_per_block"] = budget2
    for name, make in makers.items():
        cache = make()
        arm(name, cache)
        if name == "pm-kvq":
            res["c2_within_budget"] = peak(cache) <= budget2 * len(ids)
            res["c2_bit_changes"] = cache.bit_changes()
    # an extra arm (not the paper's method): the progressive budgets on KIVI's layout
    arm(
        "progressive on KIVI layout",
        ProgressiveKIVICache([budget2] * shape.n_layers, key_group=shape.head_dim, **kw),
    )
    if cfg.bench:
        from .peers import quanto_available, quanto_bytes, quanto_cache

        ok, why = quanto_available()
        res["quanto"] = ok or why
        for b in list(cfg.bench_nbits) if ok else []:
            cache = quanto_cache(model, int(b), int(c.window), shape.head_dim)
            arm(f"transformers QuantizedCache quanto {b}bit", cache)
            res["arms"][f"transformers QuantizedCache quanto {b}bit"]["peak_bytes"] = max(quanto_bytes(cache))
    # ---- the whole pipeline (PI calibration, reparameterisation, allocation) at the mixed budget, on a copy
    cal = calib_batches(tok, real_text("calib"), int(c.calib.samples), int(c.calib.len))
    lo, hi = sorted(int(b) for b in c.bit_choices)
    n_high = round(float(c.high_fraction) * shape.n_layers)
    budget3 = n_high * mem_bytes(hi, max_len, **dims) + (shape.n_layers - n_high) * mem_bytes(
        lo, max_len, **dims
    )
    rep_model = copy.deepcopy(model)
    t1 = time.process_time()
    plan = pm_kvq(
        rep_model,
        cal,
        budget3 / MIB,
        max_len,
        bit_choices=(lo, hi),
        effective_len=int(c.calib.effective_len),
        **kw,
    )
    res["seconds_calibration"] = time.process_time() - t1
    # the same calibration at the 2-bit budget: {2, 4} at 30 x Mem(2) can only be 2 bit everywhere
    plans = {
        "mixed": plan,
        "2bit": dataclasses.replace(
            plan,
            bits=[lo] * shape.n_layers,
            budgets_bytes=[budget2] * shape.n_layers,
            budget_bytes=budget2 * shape.n_layers,
        ),
    }
    for tag, pl in plans.items():
        cache = pl.cache()
        arm(f"pm-kvq whole pipeline ({tag} budget)", cache, rep_model)
        res[f"trace_{tag}"] = cache.trace
        res[f"within_budget_{tag}"] = all(
            b <= m * len(ids) for tr, m in zip(cache.trace, pl.budgets_bytes) for _, _, b in tr
        )
    res["alphas"], res["effective_len"] = plan.alphas, plan.effective_len
    # ---- C3: the allocator's bits vs random allocations of the same bytes, each as FixedBitsCache on the same
    # (reparameterised) model: the allocation alone decides the difference
    res["c3"] = {
        "sensitivity": plan.sensitivity,
        "bits": plan.bits,
        "budget_bytes": budget3,
        "n_high": n_high,
    }
    arm("allocator bits (fixed)", FixedBitsCache(plan.bits, **kw), rep_model)
    others = random_allocations(shape.n_layers, n_high, lo, hi, int(c.random_allocations), int(cfg.seed) + 7)
    for i, combo in enumerate(others):
        arm(f"random allocation {i} (fixed)", FixedBitsCache(combo, **kw), rep_model)
    res["c3"]["random"] = others
    res["c3"]["kl_random"] = [
        res["arms"][f"random allocation {i} (fixed)"]["mean_kl"] for i in range(len(others))
    ]
    # ---- one real generate() with the whole pipeline at the 2-bit budget: budget held over a real generation;
    # the FP model's perplexity of what it generated vs of the FP cache's own generation (same prompt)
    if bool(c.generate_check):
        cache = plans["2bit"].cache()
        got = sample(rep_model, prompts[:1], c, int(cfg.seed) + 1, cache)
        seq = torch.cat([prompts[:1], got], 1)
        res["generate"] = {
            "tokens": int(got.shape[1]),
            "within_budget": all(b <= budget2 for tr in cache.trace for _, _, b in tr),
            "final_bits": cache.layer_bits(),
            "fp_ppl_of_pm_kvq_generation": ppl(fp_logits(model, seq), seq, p),
            "fp_ppl_of_fp_generation": ppl(ref[:1], ids[:1], p),
        }
    del rep_model
    res["fp16_bytes_per_block"] = mem_bytes(16, max_len, **dims) * len(ids)
    res["seconds_cpu"] = time.process_time() - t0
    return res


class _Cfg(dict):
    """Attribute access to a plain dict (what `c2_caches` reads from a config node)."""

    __getattr__ = dict.__getitem__
