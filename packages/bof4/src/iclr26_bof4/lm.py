"""C6: quantise every Linear of a language model and measure weight error and perplexity increase.

Default (scale=smoke/cpu): the tiny llama of the spec (hidden 128, 2 layers, 4 heads, intermediate 512,
byte-level BPE vocab 512) trained ``lm.steps`` AdamW steps on the pydoc corpus (90/10 split by topic), once per
training seed in ``lm.seeds`` — the **headline** arm, the paper's setting in miniature. A second arm,
``lm.outlier_arm`` (**outliers**), trains the same model from an initialisation in which each Linear weight
is multiplied by ``factor`` with probability ``p`` (C5's contaminated-Gaussian rule): a documented stand-in for
the heavy-tailed outlier weights of real LLM layers, which a 0.66M-parameter model trained for a minute does not
grow. With ``lm.model`` set (a hub id, a local path, or a list of them) each model is evaluated as it is, on
pydoc text or WikiText-2 (``lm.data=wikitext2``, the paper's Table 1 setting).

Each arm quantises the model in place (``mode="fake"``), evaluates, and restores the original weights, so a
7-8B model is never copied whole. With ``lm.mirror`` each arm is also evaluated at W − δ (δ = Ŵ − W its
quantisation error): ΔPPL(W ± δ) = ±g·δ + ½ δᵀHδ + O(δ³), so the half-sum is the second-order part (what a
converged model, g ≈ 0, shows) and the half-difference the first-order part g·δ (a diagnostic, not the verdict).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import torch

from iclr26_core.evaluation import perplexity

from .model import apply_to_model, find_targets
from .synthetic import OUTLIER_INIT, inject_outliers

#: the codebook arms of C6: (label, codebook, opq_q)
ARMS = (
    ("nf4", "nf4", None),
    ("af4", "af4", None),
    ("bof4-mse", "bof4-mse", None),
    ("bof4s-mse", "bof4s-mse", None),
    ("bof4s-mse+opq", "bof4s-mse", 0.95),
)


def _data(lm: Any, tokenizer: Any):
    from iclr26_core.corpus import lm_blocks

    return lm_blocks(tokenizer, lm.data, int(lm.seq_len), train=False)


def model_names(lm: Any) -> list[str]:
    """``lm.model`` as a list: [] for the tiny llama, else one or more hub ids / paths."""
    if lm.model is None:
        return []
    if isinstance(lm.model, str):
        return [lm.model]
    return [str(m) for m in lm.model]


def _train_tiny(lm: Any, ctx: Any, seed: int, arm: str, train: Any):
    from iclr26_core.models import tiny_llama
    from iclr26_core.train import train_briefly

    model = tiny_llama(lm, seed)
    if arm == "outliers":
        gen = torch.Generator().manual_seed(OUTLIER_INIT + seed)
        with torch.no_grad():
            for _, module, _ in find_targets(model, ())[0]:
                inject_outliers(module.weight, float(lm.outlier_arm.p), float(lm.outlier_arm.factor), gen)
    return train_briefly(
        model, train, lm, seed=seed, device=ctx.device, desc=f"C6 train {arm} seed {seed}", warmup_steps=10
    )


def language_models(lm: Any, ctx: Any, seed: int = 0) -> Iterator[dict[str, Any]]:
    """One model at a time: ``{"arm", "seed", "name", "model", "val"}`` (the caller drops it before the next).

    Tiny llama: the headline arm for every seed in ``lm.seeds``, then the outlier arm for ``lm.outlier_arm.seeds``
    (training seed = ``seed`` + the listed seed). ``lm.model`` set: each named model once (arm "headline").
    """
    from iclr26_core.models import load_causal_lm, load_tokenizer

    names = model_names(lm)
    if names:
        for name in names:
            dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
            model = load_causal_lm(name, dtype=dtype)
            _, val = _data(lm, load_tokenizer(name))
            yield {
                "arm": "headline",
                "seed": 0,
                "name": name,
                "model": model.to(ctx.device).eval(),
                "val": val,
            }
        return
    from iclr26_core.tokenizers import train_bpe

    train, val = _data(lm, train_bpe(int(lm.vocab_size)))
    runs = [("headline", int(s)) for s in lm.seeds]
    outlier = lm.get("outlier_arm")
    if outlier is not None:
        runs += [("outliers", int(s)) for s in outlier.seeds]
    for arm, s in runs:
        model = _train_tiny(lm, ctx, seed + s, arm, train)
        n = sum(p.numel() for p in model.parameters()) / 1e6
        name = f"tiny llama ({n:.2f}M params, {lm.steps} steps)"
        yield {"arm": arm, "seed": s, "name": name, "model": model.to(ctx.device).eval(), "val": val}


@torch.no_grad()
def evaluate_arms(model: Any, val: Any, lm: Any, ctx: Any, desc: str = "C6 quantise") -> dict[str, Any]:
    """FP perplexity, then per codebook arm: weight MSE of the quantised layers and perplexity (fake quantisation
    in place, original weights restored after each arm)."""
    skip = tuple(lm.get("skip", ()) or ())
    batch = int(lm.batch_size)
    if lm.eval_blocks:
        val = val[: int(lm.eval_blocks)]
    ppl_fp = perplexity(model, val, batch_size=batch)
    names = [name for name, _, _ in find_targets(model, skip)[0]]
    originals = {n: model.get_submodule(n).weight.detach().clone() for n in names}
    mirror = bool(lm.get("mirror", False))
    row: dict[str, Any] = {"ppl_fp": ppl_fp, "weight_mse": {}, "ppl": {}}
    if mirror:
        row["ppl_mirror"] = {}
    for label, book, q in ctx.progress(ARMS, desc=desc):
        report = apply_to_model(model, codebook=book, block_size=int(lm.block_size), opq_q=q, skip=skip)
        row["weight_mse"][label] = report.mse
        row["ppl"][label] = perplexity(model, val, batch_size=batch)
        if (
            mirror
        ):  # W − δ for the quantisation error δ = Ŵ − W: splits ΔPPL into first- and second-order parts
            for n in names:
                model.get_submodule(n).weight.mul_(-1).add_(originals[n], alpha=2)
            row["ppl_mirror"][label] = perplexity(model, val, batch_size=batch)
        for n in names:
            model.get_submodule(n).weight.copy_(originals[n])
    model.__dict__.pop("bof4_quant_config", None)
    return row


def _spread(values: list[float]) -> dict[str, float]:
    n = len(values)
    mean = sum(values) / n
    sd = statistics.stdev(values) if n > 1 else float("nan")
    return {"mean": mean, "sd": sd, "se": sd / n**0.5 if n > 1 else float("nan"), "n": n}


def summarise_arm(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over the rows (seeds or models) of one arm, and the per-seed paired difference
    ΔPPL(BOF4-S+OPQ) − ΔPPL(NF4) with its spread."""
    arms = [a[0] for a in ARMS]
    mean = lambda f: {a: sum(f(r, a) for r in rows) / len(rows) for a in arms}  # noqa: E731
    diffs = [(r["ppl"]["bof4s-mse+opq"] - r["ppl_fp"]) - (r["ppl"]["nf4"] - r["ppl_fp"]) for r in rows]
    out = {
        "seeds": [r["seed"] for r in rows],
        "ppl_fp": sum(r["ppl_fp"] for r in rows) / len(rows),
        "weight_mse": mean(lambda r, a: r["weight_mse"][a]),
        "delta_ppl": mean(lambda r, a: r["ppl"][a] - r["ppl_fp"]),
        "paired_diff": _spread(diffs),
        "per_seed": rows,
    }
    if all("ppl_mirror" in r for r in rows):
        # ΔPPL(W + δ) = g·δ + ½ δᵀHδ + …, ΔPPL(W − δ) = −g·δ + ½ δᵀHδ + …: half-sum and half-difference
        out["second_order"] = mean(lambda r, a: (r["ppl"][a] + r["ppl_mirror"][a]) / 2 - r["ppl_fp"])
        out["first_order"] = mean(lambda r, a: (r["ppl"][a] - r["ppl_mirror"][a]) / 2)
        half_sum = lambda r, a: (r["ppl"][a] + r["ppl_mirror"][a]) / 2  # noqa: E731
        out["second_order_diff"] = _spread([half_sum(r, "bof4s-mse+opq") - half_sum(r, "nf4") for r in rows])
    return out
