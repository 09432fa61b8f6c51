"""C6: quantise every Linear of a language model and measure weight error and perplexity increase.

Default (scale=smoke/cpu): the tiny llama of the spec (hidden 128, 2 layers, 4 heads, intermediate 512,
byte-level BPE vocab 512) trained ``lm.steps`` AdamW steps on the pydoc corpus (90/10 split by topic),
once per training seed. With ``lm.model`` set (a hub id or a local path) the user's model is evaluated as
it is, on pydoc text or WikiText-2 (``lm.data=wikitext2``, the paper's Table 1 setting).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from iclr26_core.errors import UserError
from iclr26_core.evaluation import perplexity

from .model import apply_to_model

#: the arms of C6: (label, codebook, opq_q)
ARMS = (
    ("nf4", "nf4", None),
    ("af4", "af4", None),
    ("bof4-mse", "bof4-mse", None),
    ("bof4s-mse", "bof4s-mse", None),
    ("bof4s-mse+opq", "bof4s-mse", 0.95),
)


def _tiny_llama(lm: Any, seed: int):
    from iclr26_core.models import tiny_model

    return tiny_model(
        "llama",
        "small",
        seed=seed,
        hidden_size=int(lm.hidden_size),
        num_hidden_layers=int(lm.num_layers),
        num_attention_heads=int(lm.num_heads),
        num_key_value_heads=int(lm.num_heads),
        intermediate_size=int(lm.intermediate_size),
        vocab_size=int(lm.vocab_size),
        max_position_embeddings=max(256, int(lm.seq_len)),
    )


def _wikitext_blocks(tokenizer: Any, seq_len: int):
    try:
        import datasets

        test = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split="test")
    except Exception as exc:  # offline, no cache
        raise UserError(
            f"lm.data=wikitext2 needs the WikiText-2 dataset from the hub ({type(exc).__name__}); "
            "use lm.data=pydoc offline"
        ) from None
    ids = tokenizer("\n\n".join(test["text"]), return_tensors="pt")["input_ids"][0]
    n = len(ids) // seq_len
    return ids[: n * seq_len].view(n, seq_len)


def _data(lm: Any, tokenizer: Any):
    from iclr26_core.corpus import lm_dataset

    if lm.data == "wikitext2":
        return None, _wikitext_blocks(tokenizer, int(lm.seq_len))
    if lm.data != "pydoc":
        raise UserError(f"lm.data must be pydoc or wikitext2, got {lm.data!r}")
    ds = lm_dataset(tokenizer, seq_len=int(lm.seq_len))
    return ds["train"]["input_ids"], ds["validation"]["input_ids"]


def quantised_lm_errors(lm: Any, ctx: Any, seed: int = 0) -> dict[str, Any]:
    """Per arm: weight MSE (all quantised weights) and ΔPPL over the unquantised model, means over seeds.

    Returns {"model", "seeds", "ppl_fp", "weight_mse": {arm: mean}, "delta_ppl": {arm: mean},
    "per_seed": [...], "_model": the (first) full-precision model, for the bench}.
    """
    from iclr26_core.models import load_causal_lm, load_tokenizer
    from iclr26_core.tokenizers import train_bpe
    from iclr26_core.train import TrainConfig, train_lm

    skip = tuple(lm.get("skip", ()) or ())
    per_seed, first_model = [], None
    seeds = [int(s) for s in lm.seeds] if lm.model is None else [0]
    for s in seeds:
        if lm.model is None:
            tokenizer = train_bpe(int(lm.vocab_size))
            train, val = _data(lm, tokenizer)
            model = _tiny_llama(lm, seed + s)
            name = f"tiny llama ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params, {lm.steps} steps)"
            if int(lm.steps) > 0:
                train_lm(
                    model,
                    train,
                    None,
                    TrainConfig(
                        steps=int(lm.steps),
                        batch_size=int(lm.batch_size),
                        lr=float(lm.lr),
                        warmup_steps=10,
                        seed=seed + s,
                        device="cpu" if ctx.device == "cpu" else "auto",
                        desc=f"C6 train seed {s}",
                    ),
                )
        else:
            model = load_causal_lm(
                str(lm.model), dtype=torch.bfloat16 if ctx.device == "cuda" else torch.float32
            )
            tokenizer = load_tokenizer(str(lm.model))
            _, val = _data(lm, tokenizer)
            name = str(lm.model)
        model = model.to(ctx.device).eval()
        if lm.eval_blocks:
            val = val[: int(lm.eval_blocks)]
        ppl_fp = perplexity(model, val, batch_size=int(lm.batch_size))
        row: dict[str, Any] = {"seed": s, "ppl_fp": ppl_fp, "weight_mse": {}, "ppl": {}}
        for label, book, q in ctx.progress(ARMS, desc=f"C6 quantise seed {s}"):
            qmodel = copy.deepcopy(model)
            report = apply_to_model(
                qmodel, codebook=book, block_size=int(lm.block_size), opq_q=q, mode="fake", skip=skip
            )
            row["weight_mse"][label] = report.mse
            row["ppl"][label] = perplexity(qmodel, val, batch_size=int(lm.batch_size))
            del qmodel
        per_seed.append(row)
        first_model = first_model or model
    arms = [a[0] for a in ARMS]
    mean = lambda f: {a: sum(f(r, a) for r in per_seed) / len(per_seed) for a in arms}  # noqa: E731
    return {
        "model": name,
        "seeds": seeds,
        "skip": list(skip),
        "ppl_fp": sum(r["ppl_fp"] for r in per_seed) / len(per_seed),
        "weight_mse": mean(lambda r, a: r["weight_mse"][a]),
        "delta_ppl": mean(lambda r, a: r["ppl"][a] - r["ppl_fp"]),
        "per_seed": per_seed,
        "_model": first_model,
    }
