"""The ``compress`` and ``evaluate`` verbs of ``iclr26-obr``: OBR on a user's model and text."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import check_out_dir, staged_dir, write_json


def _text(source: str, split: str) -> tuple[str, str]:
    """(text, description) of ``pydoc`` (a split of the stdlib's help topics) or a UTF-8 text file."""
    if source == "pydoc":
        from iclr26_core.corpus import pydoc_text

        return pydoc_text(split), f"pydoc topics ({split} split)"
    path = Path(source).expanduser()
    if not path.is_file():
        raise UserError(f"{source!r} is neither 'pydoc' nor a text file")
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except UnicodeDecodeError:
        raise UserError(f"{source!r} is not UTF-8 text") from None


def _seqlen(model: Any, asked: int | None) -> int:
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(
        model.config, "n_positions", None
    )
    if asked is None:
        return min(2048, int(limit)) if limit else 2048
    if asked < 2:
        raise UserError(f"--seqlen must be >= 2, got {asked}")
    if limit and asked > int(limit):
        raise UserError(f"--seqlen {asked} exceeds the model's {limit} positions")
    return asked


def _blocks(tokenizer: Any, text: str, seqlen: int, what: str):
    import torch

    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    n = len(ids) // seqlen
    if n == 0:
        raise UserError(f"{what} has {len(ids)} tokens, fewer than one block of --seqlen {seqlen}")
    return ids[: n * seqlen].view(n, seqlen).to(torch.long)


def _load(model_ref: str, device: str):
    import torch

    from iclr26_core.cli import pick_device
    from iclr26_core.models import load_causal_lm, load_tokenizer

    dev = pick_device(device)
    model = load_causal_lm(model_ref, dtype=torch.bfloat16 if dev == "cuda" else torch.float32)
    tokenizer = load_tokenizer(model_ref)
    return model.to(dev).eval(), tokenizer


def compress(args: Any) -> int:
    """Compress a model with OBR (or a baseline) on calibration text and save it with masks and a report."""
    from .config import OBRConfig, check_bits

    out = check_out_dir(args.out)
    cfg = OBRConfig(method=args.method, sparsity=args.sparsity, nm=args.nm, bits=args.bits, alpha=args.alpha)
    if args.nsamples < 1:
        raise UserError(f"--nsamples must be >= 1, got {args.nsamples}")
    check_bits(cfg.bits)
    text, source = _text(args.calib, "train")
    import torch
    from safetensors.torch import save_file

    from .lm import calibration_blocks
    from .model import apply_to_model

    model, tokenizer = _load(args.model, args.device)
    seqlen = _seqlen(model, args.seqlen)
    blocks = _blocks(tokenizer, text, seqlen, f"--calib {args.calib}")
    calib = calibration_blocks(blocks, args.nsamples, args.seed)
    if len(calib) < args.nsamples:
        print(
            f"note: {source} gives {len(calib)} blocks of {seqlen} tokens, fewer than --nsamples {args.nsamples}"
        )
    t0 = time.perf_counter()
    report = apply_to_model(
        model,
        calib,
        method=cfg.method,
        sparsity=cfg.sparsity,
        nm=cfg.nm,
        bits=cfg.bits,
        alpha=cfg.alpha,
        rotate=args.rotate,
        skip=tuple(args.skip),
        batch_size=args.batch_size,
        desc=f"{cfg.method} layers",
        log=print,
    )
    seconds = time.perf_counter() - t0
    with staged_dir(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        save_file(
            {k: v.to(torch.uint8).contiguous() for k, v in report.masks.items()},
            str(tmp / "masks.safetensors"),
        )
        write_json(
            tmp / "compression.json",
            {
                "model": args.model,
                "calib": {"source": source, "blocks": len(calib), "seqlen": seqlen, "seed": args.seed},
                "seconds": round(seconds, 3),
                **report.to_dict(),
            },
        )
    t = report.to_dict()["totals"]
    print(
        f"compressed {t['n_layers']} layers with {cfg.method} ({'nm=' + args.nm if cfg.nm else f'sparsity {cfg.sparsity:g}'}, "
        f"W{cfg.bits}{', rotated' if args.rotate else ''}): sparsity {t['sparsity']:.3f}, "
        f"{t['bits_per_weight']:.3f} bits/weight stored, mean output error {t['mean_output_error']:.4g}, {seconds:.1f} s"
    )
    print(f"wrote {out}")
    return 0


def evaluate(args: Any) -> int:
    """Perplexity of a (compressed) model on held-out text, written to metrics.json."""
    from iclr26_core.evaluation import perplexity
    from iclr26_core.fs import write_json as _write

    local = Path(args.model).expanduser()
    if args.out is None and not local.is_dir():
        raise UserError("--out is needed when --model is not a local directory")
    dest = Path(args.out) if args.out else local / "metrics.json"
    if dest.exists() and dest.is_dir():
        raise UserError(f"--out {str(dest)!r} is a directory; give a file name")
    text, source = _text(args.data, "validation")
    model, tokenizer = _load(args.model, args.device)
    seqlen = _seqlen(model, args.seqlen)
    blocks = _blocks(tokenizer, text, seqlen, f"--data {args.data}")
    ppl = perplexity(model, blocks, batch_size=args.batch_size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _write(
        dest,
        {"model": args.model, "data": source, "seqlen": seqlen, "blocks": len(blocks), "perplexity": ppl},
    )
    print(f"perplexity {ppl:.4f} on {source} ({len(blocks)} blocks of {seqlen} tokens); wrote {dest}")
    return 0
