"""``scale=real``: BOF4 on a real pretrained model — SmolLM2-135M-Instruct (``iclr26_core.pretrained``).

Every ``nn.Linear`` of the 30 decoder layers (106 M weights; ``lm_head`` and the embeddings kept, as QLoRA does)
is quantised at I = ``real.block_size`` by each variant — ours (NF4, BOF4, BOF4-S, BOF4-S + OPQ) and the installed
peers (bitsandbytes NF4, torchao NF4, hqq 4-bit, optimum-quanto int4) — and the model is evaluated on held-out
real text (``real_text("test")``, ``real.eval_tokens`` tokens in blocks of ``real.seq_len``).

Cost: one loaded model, weights swapped in place per variant (the float32 originals kept aside); the body runs in
``real.compute_dtype`` (bfloat16: QLoRA's compute dtype, ≈ 2.5× faster than float32 on this CPU), ``lm_head``
in float32 from a float32 copy so the logits are not rounded; per-block NLL sums give paired differences.

C3-C5 use the weight errors pooled over the same layers (:func:`.measure.model_errors`, block sizes
``errors.block_sizes``; at I ≠ 64 only the codebooks the rules compare), C6 the perplexities. Caveat: the
model's weights are stored as Q4_1 in the GGUF, so the "full-precision" reference is the dequantised Q4_1
model; and it is the instruct model.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from iclr26_core.report import Claim, Results

from .claims import claim_c3, claim_c4, claim_c5, claim_c6
from .measure import model_errors
from .model import find_targets
from .peers import probe
from .quantizer import quantize

OURS = {  # variant -> (codebook, OPQ quantile)
    "nf4": ("nf4", None),
    "bof4-mse": ("bof4-mse", None),
    "bof4s-mse": ("bof4s-mse", None),
    "bof4s-mse+opq": ("bof4s-mse", 0.95),
}


def eval_blocks(model: Any, head32: torch.Tensor, blocks: torch.Tensor, ctx: Any, desc: str) -> list[float]:
    """Per-block NLL sums (nats, float64) of next-token prediction: body in the model's dtype, logits in float32."""
    sums = []
    with torch.no_grad():
        for ids in ctx.progress(list(blocks), desc=desc):
            hidden = model.model(input_ids=ids[None]).last_hidden_state[0, :-1].float()
            logits = F.linear(hidden, head32)
            sums.append(float(F.cross_entropy(logits, ids[1:], reduction="sum").double()))
    return sums


def _variant_fn(name: str, block_size: int):
    """``(fn(w) -> (ŵ float32, bits/weight), "")`` or ``(None, reason)``."""
    if name in OURS:
        book, q = OURS[name]

        def ours(w: torch.Tensor) -> tuple[torch.Tensor, float]:
            qt = quantize(w, book, block_size, opq_q=q)
            return qt.dequantize(), qt.bits_per_weight

        return ours, ""
    peer, why = probe(name)
    if peer is None:
        return None, why
    return (lambda w: peer(w, block_size)), ""


def _swap_in(model, originals, fn, dtype) -> dict[str, float]:
    """Quantise every original weight with ``fn``, put ŵ (in ``dtype``) into the model; pooled errors."""
    se = ae = bits = 0.0
    numel = 0
    for name, w in originals.items():
        deq, b = fn(w)
        diff = deq.double().reshape(w.shape) - w.double()
        se, ae = se + float(diff.square().sum()), ae + float(diff.abs().sum())
        bits += b * w.numel()
        numel += w.numel()
        model.get_submodule(name).weight.data = deq.reshape(w.shape).to(dtype)
        del deq, diff
    return {"mse": se / numel, "mae": ae / numel, "bits_per_weight": bits / numel}


def _paired(a: list[float], b: list[float], n_tokens: int) -> dict[str, float]:
    """Mean per-token NLL difference a − b over blocks: mean, sd and SE over the blocks (nats/token)."""
    per_block = n_tokens / len(a)
    d = [(x - y) / per_block for x, y in zip(a, b, strict=True)]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / max(len(d) - 1, 1))
    return {"mean": mean, "sd": sd, "se": sd / math.sqrt(len(d)), "n": len(d)}


def run_real(cfg: Any, ctx: Any) -> Results:
    from iclr26_core.corpus import token_blocks
    from iclr26_core.pretrained import load_smollm2, real_text

    r = cfg.real
    block_size, seq_len = int(r.block_size), int(r.seq_len)
    dtype = getattr(torch, str(r.compute_dtype))
    t0 = time.process_time()
    model, tok = load_smollm2(dtype=torch.float32)
    blocks = token_blocks(real_text("test"), tok, seq_len)
    n_blocks = min(len(blocks), -(-int(r.eval_tokens) // seq_len))
    blocks = blocks[:n_blocks]
    n_tokens = n_blocks * (seq_len - 1)
    ctx.log(
        f"SmolLM2-135M-Instruct: {n_blocks} blocks x {seq_len} tokens of held-out text ({n_tokens:,} predicted)"
    )

    errs, opq = model_errors(model, cfg, ctx, "smollm2", skip=tuple(r.skip), sweep_books=tuple(r.sweep_books))
    targets, skipped = find_targets(model, tuple(r.skip))
    originals = {name: module.weight.detach().clone() for name, module, _ in targets}
    del targets
    head32 = model.lm_head.weight.detach().float().clone()
    model.to(dtype)

    rows: dict[str, dict[str, Any]] = {}
    nll: dict[str, list[float]] = {"fp": eval_blocks(model, head32, blocks, ctx, "real: reference")}
    unavailable = []
    for name in [*OURS, *r.peers]:
        fn, why = _variant_fn(name, block_size)
        if fn is None:
            unavailable.append(f"{name} ({why})")
            continue
        start = time.process_time()
        try:
            rows[name] = _swap_in(model, originals, fn, dtype)
        except Exception as exc:  # a peer failing on a layer: one line, the variant left out
            unavailable.append(f"{name} (failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
            continue
        rows[name]["quantise_cpu_s"] = time.process_time() - start
        nll[name] = eval_blocks(model, head32, blocks, ctx, f"real: {name}")
    ppl = {k: math.exp(sum(v) / n_tokens) for k, v in nll.items()}
    for name, row in rows.items():
        row.update(ppl=ppl[name], delta_ppl=ppl[name] - ppl["fp"], mse_vs_nf4=row["mse"] / rows["nf4"]["mse"])
    ours = {k: rows[k] for k in OURS}
    c6 = {
        "headline": {
            "SmolLM2-135M-Instruct": {
                "weight_mse": {k: v["mse"] for k, v in ours.items()},
                "delta_ppl": {k: v["delta_ppl"] for k, v in ours.items()},
                "ppl_fp": ppl["fp"],
                "seeds": [0],
                "paired_diff": _paired(nll["bof4s-mse+opq"], nll["nf4"], n_tokens),
                "unit": "nats/token over blocks",
            }
        }
    }
    paired = c6["headline"]["SmolLM2-135M-Instruct"]["paired_diff"]
    c6_claim = _real_c6(claim_c6(c6), rows, paired, f"reference PPL {ppl['fp']:.3f} on {n_tokens:,} tokens")
    sizes = [int(i) for i in cfg.errors.block_sizes]
    claims = [
        claim_c3({"SmolLM2-135M-Instruct": errs}, sizes),
        claim_c4({"SmolLM2-135M-Instruct": errs}, sizes),
    ]
    claims += [claim_c5({"SmolLM2-135M-Instruct": opq}, cfg), c6_claim]
    table = real_table(rows, ppl["fp"], n_tokens, unavailable)
    (ctx.run_dir / "real.md").write_text(table + "\n")
    ctx.log(table)
    metrics = {
        "real": {
            "model": "SmolLM2-135M-Instruct (GGUF Q4_1, dequantised)",
            "block_size": block_size,
            "seq_len": seq_len,
            "blocks": n_blocks,
            "tokens_predicted": n_tokens,
            "compute_dtype": str(r.compute_dtype),
            "quantised_layers": len(originals),
            "quantised_weights": sum(w.numel() for w in originals.values()),
            "kept": skipped,
            "ppl_fp": ppl["fp"],
            "variants": rows,
            "unavailable": unavailable,
            "nll_per_block": nll,
            "cpu_seconds": time.process_time() - t0,
        },
        "errors": errs,
        "opq": opq,
    }
    return Results(claims, metrics=metrics, figures=[])


def _real_c6(claim: Claim, rows: dict[str, dict[str, Any]], paired: dict[str, float], where: str) -> Claim:
    """C6 as on the tiny model, plus the rank among every variant that ran (peers included) and the paired
    per-block resolution of the BOF4-S+OPQ − NF4 gap."""
    ranking = sorted(rows, key=lambda k: rows[k]["delta_ppl"])
    measured = dict(claim.measured)
    measured["rank among all (peers incl.)"] = f"{ranking.index('bof4s-mse+opq') + 1} of {len(ranking)}"
    resolved = "resolved" if abs(paired["mean"]) > 2 * paired["se"] else "not resolved"
    note = (
        f"SmolLM2-135M-Instruct (dequantised Q4_1), {where}; dNLL(BOF4-S+OPQ) - dNLL(NF4) per "
        f"block {paired['mean']:+.4f} ± {paired['sd']:.4f} sd, SE {paired['se']:.4f} nats/token over "
        f"{paired['n']} blocks: {resolved} (|mean| > 2 SE); all variants by dPPL: {' < '.join(ranking)}"
    )
    return Claim(claim.id, claim.claim, claim.paper, measured, claim.holds, claim.rule, note)


def real_table(rows: dict[str, dict[str, Any]], ppl_fp: float, n_tokens: int, unavailable: list[str]) -> str:
    """One markdown table: every variant's weight error, bits and perplexity on the held-out tokens."""
    lines = [
        f"reference (dequantised Q4_1 weights): PPL {ppl_fp:.4f} on {n_tokens:,} held-out tokens",
        "",
        "| variant | weight MSE | MSE/NF4 | weight MAE | bits/weight | PPL | dPPL | quantise CPU s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in sorted(rows.items(), key=lambda kv: kv[1]["delta_ppl"]):
        lines.append(
            f"| {name} | {row['mse']:.4e} | {row['mse_vs_nf4']:.4f} | {row['mae']:.4e} | "
            f"{row['bits_per_weight']:.3f} | {row['ppl']:.4f} | {row['delta_ppl']:+.4f} | {row['quantise_cpu_s']:.1f} |"
        )
    if unavailable:
        lines += ["", "not run: " + "; ".join(unavailable)]
    return "\n".join(lines)
