"""The ``calibrate``, ``evaluate`` and ``generate`` verbs of ``iclr26-pmkvq`` (on a user's model)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import check_out_dir, staged_dir, write_json


def _text(source: str, split: str) -> str:
    if source == "pydoc":
        from iclr26_core.corpus import pydoc_text

        return pydoc_text(split)
    path = Path(source)
    if not path.is_file():
        raise UserError(f"text source {source!r} is neither 'pydoc' nor a text file")
    return path.read_text()


def _blocks(tokenizer: Any, text: str, length: int, n: int, what: str):
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    have = len(ids) // length
    if have < n:
        raise UserError(f"{what} has {len(ids)} tokens: fewer than {n} x {length}; give more text or shorten")
    return ids[: n * length].view(n, length)


def _load(model_path: str):
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .arch import check_supported

    model = load_causal_lm(model_path).eval()
    check_supported(model)
    return model, load_tokenizer(model_path)


def calibrate(args: Any) -> int:
    """Reparameterise (PI calibration), compute sensitivities, allocate; write plan.json + rep_scales."""
    from .cache import mem_bytes
    from .quantizer import CACHE_BITS, check_bits

    out = check_out_dir(args.out)
    if not args.budget_mb > 0:
        raise UserError(f"--budget-mb must be > 0, got {args.budget_mb}")
    if args.max_len <= 0 or args.calib_len <= 0 or args.calib_samples <= 0:
        raise UserError("--max-len, --calib-len and --calib-samples must be > 0")
    for b in args.bit_choices:
        check_bits(b, CACHE_BITS, "--bit-choices entry")
    text = _text(args.calib, "train")
    model, tokenizer = _load(args.model)
    from .pipeline import pm_kvq

    blocks = _blocks(tokenizer, text, args.calib_len, args.calib_samples, "the calibration text")
    t0 = time.perf_counter()
    plan = pm_kvq(
        model,
        [row[None] for row in blocks],
        args.budget_mb,
        args.max_len,
        bit_choices=args.bit_choices,
        effective_len=args.effective_len,
        reparameterize=not args.no_reparam,
        group_size=args.group_size,
        window=args.window,
    )
    seconds = time.perf_counter() - t0
    with staged_dir(out) as tmp:
        (tmp / "plan.json").write_text(plan.to_json())
        if plan.rep_scales is not None:
            plan.rep_scales.save(tmp / "rep_scales.safetensors")
    fp16 = mem_bytes(16, args.max_len, plan.n_kv_heads, plan.head_dim, plan.group_size)
    print(f"calibrated {args.model} on {len(blocks)} x {args.calib_len} tokens in {seconds:.1f} s")
    for i, (b, m) in enumerate(zip(plan.bits, plan.budgets_bytes)):
        print(f"  block {i:>3}: {b:>2} bit at max_len, budget {m:,} bytes ({m / fp16:.1%} of 16 bit)")
    print(f"total {sum(plan.budgets_bytes):,} of {plan.budget_bytes:,} bytes; wrote {out}")
    return 0


def _ppl(logits, ids) -> float:
    import torch

    ce = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).double(), ids[:, 1:].reshape(-1)
    )
    return float(ce.exp())


def evaluate(args: Any) -> int:
    """FP cache vs PM-KVQ vs fixed bits (the plan's bits from the first token) on held-out text."""
    from .cache import FixedBitsCache
    from .decoding import flush_aligned_logits, fp_logits, kl_per_step
    from .figures import memory_figure
    from .pipeline import PMKVQPlan

    plan = PMKVQPlan.load(args.plan)
    out = check_out_dir(args.out or Path(args.plan) / "eval")
    if args.length < 2 or args.texts < 1:
        raise UserError("--length must be >= 2 and --texts >= 1")
    if args.length > plan.max_len:
        raise UserError(f"--length {args.length} is beyond the plan's max_len {plan.max_len}")
    text = _text(args.data, "validation")
    model, tokenizer = _load(args.model)
    plan.prepare(model)
    ids = _blocks(tokenizer, text, args.length, args.texts, "the evaluation text")
    ref = fp_logits(model, ids)
    pm_cache = plan.cache()
    fixed_cache = FixedBitsCache(
        plan.bits, n_sink=plan.n_sink, window=plan.window, group_size=plan.group_size
    )
    results: dict[str, Any] = {"fp": {"ppl": _ppl(ref, ids)}}
    for name, cache in (("pm-kvq", pm_cache), ("fixed", fixed_cache)):
        logits = flush_aligned_logits(model, ids, cache)
        results[name] = {
            "mean_kl": float(kl_per_step(ref, logits).mean()),
            "ppl": _ppl(logits, ids),
            "peak_bytes": [max(b for _, _, b in tr) for tr in cache.trace],
            "final_bits": cache.layer_bits(),
        }
    batch_budgets = [b * len(ids) for b in plan.budgets_bytes]
    with staged_dir(out) as tmp:
        write_json(
            tmp / "metrics.json",
            {
                "model": args.model,
                "texts": len(ids),
                "length": args.length,
                "budgets_bytes": batch_budgets,
                **results,
            },
        )
        memory_figure(pm_cache.trace, batch_budgets, tmp / "memory_trace.png")
    print(f"{len(ids)} text(s) x {args.length} tokens, budgets {plan.budgets_bytes} bytes per block")
    print(f"  fp      PPL {results['fp']['ppl']:.3f}")
    for name in ("pm-kvq", "fixed"):
        r = results[name]
        print(f"  {name:<7} PPL {r['ppl']:.3f}  mean KL {r['mean_kl']:.4g}  peak bytes {r['peak_bytes']}")
    print(f"wrote {out}")
    return 0


def generate(args: Any) -> int:
    """Greedy generation with the plan's cache; prints the text and the bytes used per block."""
    from .decoding import greedy
    from .pipeline import PMKVQPlan

    plan = PMKVQPlan.load(args.plan)
    if args.max_new_tokens <= 0:
        raise UserError(f"--max-new-tokens must be > 0, got {args.max_new_tokens}")
    model, tokenizer = _load(args.model)
    plan.prepare(model)
    ids = tokenizer(args.prompt, return_tensors="pt")["input_ids"]
    if ids.shape[1] == 0:
        raise UserError("the prompt is empty")
    if ids.shape[1] + args.max_new_tokens > plan.max_len:
        raise UserError(
            f"prompt + --max-new-tokens ({ids.shape[1] + args.max_new_tokens}) exceeds max_len {plan.max_len}"
        )
    cache = plan.cache()
    new = greedy(model, ids, args.max_new_tokens, cache)
    print(tokenizer.decode(new[0], skip_special_tokens=True))
    for i, (bits, used, budget, extra) in enumerate(
        zip(cache.layer_bits(), cache.memory_bytes(), plan.budgets_bytes, cache.overhead_bytes())
    ):
        print(f"block {i}: {bits:>2} bit, {used:,} / {budget:,} bytes (+ {extra:,} bytes sink and window)")
    return 0
