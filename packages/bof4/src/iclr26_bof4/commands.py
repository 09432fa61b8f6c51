"""The ``quantize`` and ``codebook`` verbs of ``iclr26-bof4``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json


def _ppl(model: Any, tokenizer: Any, text: str, seq_len: int) -> float:
    from iclr26_core.evaluation import perplexity

    ids = tokenizer(text, return_tensors="pt")["input_ids"][0]
    n = len(ids) // seq_len
    if n == 0:
        raise UserError(f"--eval-text has {len(ids)} tokens, fewer than one block of --seq-len {seq_len}")
    return perplexity(model, ids[: n * seq_len].view(n, seq_len), batch_size=4)


def quantize(args: Any) -> int:
    """Quantise a model, save it (safetensors + config + tokenizer) with quant_report.json."""
    out = check_out_dir(args.out)
    text = None
    if args.eval_text:
        path = Path(args.eval_text)
        if not path.is_file():
            raise UserError(f"--eval-text {args.eval_text!r} is not a file")
        text = path.read_text()
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .config import check_block_size, check_opq_q
    from .model import apply_to_model, save_packed

    check_block_size(args.block_size)
    check_opq_q(args.opq_q)
    model = load_causal_lm(args.model)
    tokenizer = None
    if not args.model.startswith("tiny-"):
        try:
            tokenizer = load_tokenizer(args.model)
        except UserError:
            tokenizer = None  # a model directory without a tokenizer: save the model alone
    if text is not None and tokenizer is None:
        raise UserError("--eval-text needs a tokenizer next to the model")
    before = _ppl(model, tokenizer, text, args.seq_len) if text is not None else None
    t0 = time.perf_counter()
    report = apply_to_model(
        model,
        codebook=args.codebook,
        block_size=args.block_size,
        opq_q=args.opq_q,
        mode=args.mode,
        skip=tuple(args.skip),
    )
    seconds = time.perf_counter() - t0
    after = _ppl(model, tokenizer, text, args.seq_len) if text is not None else None
    with staged_dir(out) as tmp:
        if args.mode == "packed":
            save_packed(model, tmp)
        else:
            model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        summary = {"model": args.model, "seconds": round(seconds, 3), **report.to_dict()}
        if text is not None:
            summary["perplexity"] = {"before": before, "after": after, "eval_text": args.eval_text}
        write_json(tmp / "quant_report.json", summary)
    t = report.to_dict()["totals"]
    print(
        f"quantised {t['n_layers']} layers ({t['numel']:,} weights) with {args.codebook}, I={args.block_size}, "
        f"OPQ q={args.opq_q}: weight MSE {t['mse']:.3e}, outliers {t['outlier_fraction']:.3%}, "
        f"{t['bits_per_weight']:.3f} bits/weight"
    )
    if text is not None:
        print(f"perplexity on {args.eval_text}: {before:.3f} -> {after:.3f}")
    print(f"wrote {out}")
    return 0


def codebook(args: Any) -> int:
    """Print the 16 levels of a named codebook, or derive one for any block size / metric / sign."""
    from .config import check_block_size

    check_block_size(args.block_size)
    if args.out and Path(args.out).exists():
        raise UserError(f"--out {args.out!r} exists; choose a new file")
    if args.name:
        from .codebooks import codebook_info

        info = codebook_info(args.name, args.block_size)
    else:
        from .lloyd import derive_codebook

        levels = derive_codebook(
            args.block_size,
            metric=args.metric,
            signed=args.signed,
            method=args.method,
            n_samples=args.samples,
            seed=args.seed,
        )
        name = f"bof4{'s' if args.signed else ''}-{args.metric}"
        info = {
            "name": name,
            "block_size": args.block_size,
            "levels": [float(v) for v in levels.tolist()],
            "source": f"derived ({args.method}"
            + (f", {args.samples} samples, seed {args.seed})" if args.method == "empirical" else ")"),
        }
    print(f"{info['name']} I={info['block_size']} ({info['source']}):")
    print(" ".join(f"{v:+.5f}" for v in info["levels"]))
    if args.out:
        atomic_write_text(args.out, json.dumps(info, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0
