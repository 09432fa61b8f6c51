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


def _device_map(value: str | None) -> Any:
    """``--device-map``: None, a device ("cpu", "cuda:0"), "auto", or a JSON object {module: device}."""
    if value is None or not value.strip().startswith("{"):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise UserError(f"--device-map is not valid JSON: {exc}") from None


def load_user_model(args: Any) -> tuple[Any, Any]:
    """``(model, tokenizer or None)`` for ``--model`` with ``--dtype`` and ``--device-map`` (verbs' shared loader)."""
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .checkpoint import resolve_dtype

    dtype = resolve_dtype(getattr(args, "dtype", "auto"))
    device_map = _device_map(getattr(args, "device_map", None))
    if args.model.startswith("tiny-"):
        model = load_causal_lm(args.model)
        return (model if dtype in (None, "auto") else model.to(dtype)), None
    kwargs: dict[str, Any] = {"dtype": dtype}
    if device_map is not None:
        kwargs["device_map"] = device_map
    model = load_causal_lm(args.model, **kwargs)
    try:
        tokenizer = load_tokenizer(args.model)
    except UserError:
        tokenizer = None  # a model directory without a tokenizer: the model alone
    return model, tokenizer


def quantize(args: Any) -> int:
    """Quantise a model layer by layer, save it (safetensors + config + tokenizer) with quant_report.json."""
    out = check_out_dir(args.out)
    text = None
    if args.eval_text:
        path = Path(args.eval_text)
        if not path.is_file():
            raise UserError(f"--eval-text {args.eval_text!r} is not a file")
        text = path.read_text()
    from .checkpoint import save_packed
    from .config import check_block_size, check_opq_q
    from .model import apply_to_model

    check_block_size(args.block_size)
    check_opq_q(args.opq_q)
    model, tokenizer = load_user_model(args)
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
        save_packed(model, tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        summary = {
            "model": args.model,
            "dtype": str(args.dtype),
            "device_map": args.device_map,
            "seconds": round(seconds, 3),
            **report.to_dict(),
        }
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
        from .derive import derive_codebook

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


def bench(args: Any) -> int:
    """Bench every Linear of a user's model (ours, affine int4, installed peers): summary table, bench.csv."""
    from .config import check_block_size, check_opq_q

    check_block_size(args.block_size)
    check_opq_q(args.opq_q)
    if args.max_layers is not None and args.max_layers < 1:
        raise UserError(f"--max-layers must be >= 1, got {args.max_layers}")
    out = check_out_dir(args.out) if args.out else None
    from iclr26_core.cli import progress
    from iclr26_core.report import peers_line

    from .bench import (
        agreement_line,
        bench_markdown,
        peer_status,
        peer_versions,
        rows_csv,
        run_bench,
        summary_table,
    )
    from .model import find_targets
    from .peers import PEERS

    model, _ = load_user_model(args)
    targets, _ = find_targets(model, tuple(args.skip))
    layers = [(name, kind) for name, _, kind in targets][: args.max_layers]
    del targets
    if not layers:
        raise UserError(f"no nn.Linear or Conv1D layer to bench in {args.model} (skip={args.skip})")
    missing, reasons, available = peer_status()
    peers = () if args.no_peers else tuple(p for p in PEERS if p in available)

    def tensors():
        for name, kind in layers:
            w = model.get_submodule(name).weight.detach()
            yield "model layers", name, (w.t() if kind == "conv1d" else w).float().cpu()

    result = run_bench(
        tensors(),
        block_size=args.block_size,
        opq_q=args.opq_q,
        peers=peers,
        progress=lambda it: progress(it, total=len(layers), desc="bench"),
    )
    what = f"Tensors: the {len(layers)} Linear layers of {args.model} (`model layers`)."
    text = bench_markdown(result, args.block_size, what, peer_versions())
    print(summary_table(result["summary"], result["groups"]))
    print(agreement_line(result["agreement"]))
    for name, reason in reasons.items():
        if reason and not args.no_peers:
            print(f"peer {name} unavailable: {reason}")
    if not args.no_peers and missing:
        print(peers_line("bof4", missing))
    if out is not None:
        with staged_dir(out) as tmp:
            (tmp / "bench.md").write_text(text)
            (tmp / "bench.csv").write_text(rows_csv(result["rows"], result["group_of"]))
            write_json(
                tmp / "bench.json",
                {
                    "model": args.model,
                    "block_size": args.block_size,
                    "summary": result["summary"],
                    "agreement": result["agreement"],
                    "peers": peer_versions(),
                },
            )
        print(f"wrote {out}")
    return 0
