"""C5 end to end: a tiny llama trained on pydoc text, every decoder Linear compressed to W4 + 50 %, perplexity.

Default (``lm.model: null``): the spec's tiny llama (hidden 128, 2 layers, 4 heads, intermediate 512 — powers of
two, so the Hadamard rotation applies; byte-level BPE vocab 512) trained ``lm.steps`` AdamW steps on the pydoc
topics of the training split, once per training seed. Calibration blocks are drawn from the training topics,
perplexity is measured on the validation topics (disjoint). With ``lm.model`` set (a hub id or local path,
e.g. at ``scale=paper``) that model is compressed as it is, calibrated on WikiText-2 train and evaluated on
WikiText-2 test when ``lm.data=wikitext2``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from iclr26_core.evaluation import perplexity
from iclr26_core.models import tiny_llama

from .model import apply_to_model


def lm_blocks(lm: Any, tokenizer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(train blocks, held-out blocks) of ``lm.seq_len`` tokens: pydoc train/validation topics or WikiText-2."""
    from iclr26_core.corpus import lm_blocks

    return lm_blocks(tokenizer, lm.data, int(lm.seq_len))


def calibration_blocks(train: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """``n`` blocks drawn without replacement from ``train`` (all of them when there are fewer)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(train), generator=g)[: min(n, len(train))]
    return train[idx]


def train_tiny(lm: Any, train: torch.Tensor, seed: int, device: str):
    from iclr26_core.train import train_briefly

    warmup = min(30, int(lm.steps) // 10)
    model = train_briefly(
        tiny_llama(lm, seed),
        train,
        lm,
        seed=seed,
        device=device,
        desc=f"C5 train seed {seed}",
        warmup_steps=warmup,
    )
    return model.eval()


def compressed_perplexities(lm: Any, methods: list[str], ctx: Any, seed: int = 0) -> dict[str, Any]:
    """Per training seed: dense perplexity, and per method the perplexity and the compression report totals.

    Returns {"model", "seeds", "per_seed": [{"seed", "ppl_dense", "ppl": {m}, "delta": {m}, "report": {m}}],
    "delta_mean": {m}, "_first": the first seed's dense model, tokenizer, calib and val blocks (not JSON)}.
    """
    from iclr26_core.models import load_causal_lm, load_tokenizer
    from iclr26_core.tokenizers import train_bpe

    per_seed, first = [], None
    seeds = [int(s) for s in lm.seeds] if lm.model is None else [0]
    name = str(lm.model)
    for s in seeds:
        if lm.model is None:
            tokenizer = train_bpe(int(lm.vocab_size))
            train, val = lm_blocks(lm, tokenizer)
            model = train_tiny(lm, train, seed + s, ctx.device)
            name = (
                f"tiny llama ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params, "
                f"{lm.steps} steps x {lm.batch_size} x {lm.seq_len} tokens)"
            )
        else:
            dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
            model = load_causal_lm(str(lm.model), dtype=dtype).eval()
            tokenizer = load_tokenizer(str(lm.model))
            train, val = lm_blocks(lm, tokenizer)
        model = model.to(ctx.device)
        if lm.eval_blocks:
            val = val[: int(lm.eval_blocks)]
        calib = calibration_blocks(train, int(lm.nsamples), seed + s)
        if lm.rotate:
            from .rotation import hadamard_rotate

            hadamard_rotate(model, seed=seed + s, online=lm.act_bits is not None)
        ppl_dense = perplexity(model, val, batch_size=int(lm.eval_batch_size))
        row: dict[str, Any] = {"seed": s, "ppl_dense": ppl_dense, "ppl": {}, "delta": {}, "report": {}}
        for method in methods:
            q = copy.deepcopy(model)
            report = apply_to_model(
                q,
                calib,
                method=method,
                sparsity=float(lm.sparsity),
                nm=lm.nm,
                bits=None if lm.bits is None else int(lm.bits),
                alpha=float(lm.alpha),
                act_bits=lm.act_bits,
                kv_bits=lm.kv_bits,
                batch_size=int(lm.calib_batch_size),
                desc=f"C5 {method} seed {s}",
            )
            ppl = perplexity(q, val, batch_size=int(lm.eval_batch_size))
            row["ppl"][method] = ppl
            row["delta"][method] = ppl - ppl_dense
            row["report"][method] = report.to_dict()["totals"]
            del q
        per_seed.append(row)
        if first is None:  # the first seed's dense model and data, for the peers bench
            first = {
                "model": model,
                "tokenizer": tokenizer,
                "calib": calib,
                "val": val,
                "ppl_dense": ppl_dense,
            }
        ctx.log(
            f"C5 seed {s}: dense PPL {ppl_dense:.3f}; "
            + ", ".join(f"{m} {row['ppl'][m]:.3f}" for m in methods)
        )
    delta_mean = {m: sum(r["delta"][m] for r in per_seed) / len(per_seed) for m in methods}
    return {"model": name, "seeds": seeds, "per_seed": per_seed, "delta_mean": delta_mean, "_first": first}
