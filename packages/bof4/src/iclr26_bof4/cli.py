"""``iclr26-bof4``: reproduce the paper's claims, quantise a model, print or derive a codebook.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli

from .config import CODEBOOK_NAMES


def _opq(value: str) -> float | None:
    if value.lower() == "none":
        return None
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1) or 'none', got {value!r}") from None


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="local model directory or hub id (tiny-llama for a test run)"
    )
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16", "float16"],
        default="auto",
        help="dtype to load the model in (default auto: the checkpoint's own, e.g. bfloat16 for an 8B model)",
    )
    p.add_argument(
        "--device-map",
        default=None,
        help="where to load the model (accelerate): cpu (default), cuda, cuda:0, auto, or a JSON {module: device}",
    )


def _quantize_args(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    p.add_argument(
        "--codebook", default="bof4s-mse", help=f"one of {', '.join(CODEBOOK_NAMES)} (default bof4s-mse)"
    )
    p.add_argument("--block-size", type=int, default=64, help="weights per block I (default 64)")
    p.add_argument(
        "--opq-q", type=_opq, default=0.95, help="OPQ quantile q in (0, 1), or 'none' (default 0.95)"
    )
    p.add_argument(
        "--mode",
        choices=["fake", "packed"],
        default="fake",
        help="fake: dequantised float weights (peft/LoRA friendly); packed: 4-bit codes + BOF4Linear",
    )
    p.add_argument("--skip", nargs="*", default=["lm_head"], help="module names to keep in full precision")
    p.add_argument("--eval-text", help="a text file: report perplexity before and after quantisation")
    p.add_argument("--seq-len", type=int, default=512, help="sequence length for --eval-text (default 512)")


def _bench_args(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("--out", help="new (or empty) directory for bench.md, bench.csv and bench.json")
    p.add_argument("--block-size", type=int, default=64, help="weights per block / group (default 64)")
    p.add_argument(
        "--opq-q",
        type=_opq,
        default=0.95,
        help="OPQ quantile of the bof4s-mse+opq row, or 'none' (default 0.95)",
    )
    p.add_argument("--skip", nargs="*", default=["lm_head"], help="module names left out of the bench")
    p.add_argument("--max-layers", type=int, help="bench only the first N Linear layers")
    p.add_argument("--no-peers", action="store_true", help="our methods and affine int4 only")


def _codebook_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", choices=CODEBOOK_NAMES, help="print a named codebook (published or shipped)")
    p.add_argument("--block-size", type=int, default=64, help="block size I (default 64)")
    p.add_argument("--metric", choices=["mse", "mae"], default="mse")
    p.add_argument("--signed", action="store_true", help="signed absmax (BOF4-S)")
    p.add_argument(
        "--method",
        choices=["empirical", "theory"],
        default="empirical",
        help="weighted Lloyd on Gaussian samples, or numerical integration",
    )
    p.add_argument("--samples", type=int, default=2**22, help="N(0,1) samples for the empirical method")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the levels to this JSON file")


app = paper_cli(
    slug="bof4",
    model_key="lm.model",  # model=<id or path> sets it (None: reproduce takes no user model)
    peers_key="bench",  # peers=true|false sets it
    title="BOF4: block-wise optimal 4-bit float quantization (ICLR 2026)",
    description="NF4-compatible 4-bit codebooks with lower error, signed absmax (BOF4-S) and outlier-preserving "
    "quantisation (OPQ).",
    reproduce="iclr26_bof4.reproduce:run",
    verbs=[
        Verb(
            "quantize",
            "quantise every Linear of a transformers model to 4 bit and save it",
            run="iclr26_bof4.commands:quantize",
            arguments=_quantize_args,
        ),
        Verb(
            "bench",
            "side by side on a model's Linear layers: our codebooks, affine int4 and the installed peers",
            run="iclr26_bof4.commands:bench",
            arguments=_bench_args,
        ),
        Verb(
            "codebook",
            "print (and save) a 16-level codebook: a named one, or derived for any block size",
            run="iclr26_bof4.commands:codebook",
            arguments=_codebook_args,
        ),
    ],
)
main = app
