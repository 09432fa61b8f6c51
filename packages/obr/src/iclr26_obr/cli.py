"""``iclr26-obr``: reproduce the paper's claims, compress a model with OBR, evaluate its perplexity.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli

METHODS = (
    "obr_gptq",
    "obr_rtn",
    "rtn",
    "gptq",
    "wanda_rtn",
    "wanda_gptq",
    "sparsegpt_gptq",
    "sparsegpt_joint",
)


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seqlen", type=int, default=None, help="tokens per block (default: min(2048, model positions))"
    )
    p.add_argument("--batch-size", type=int, default=8, help="blocks per forward pass (default 8)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")


def _compress_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="local model directory or hub id (tiny-llama for a test run)"
    )
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    p.add_argument("--method", choices=METHODS, default="obr_gptq", help="default obr_gptq")
    sp = p.add_mutually_exclusive_group()
    sp.add_argument(
        "--sparsity", type=float, default=0.5, help="unstructured sparsity per row in [0, 1) (default 0.5)"
    )
    sp.add_argument("--nm", default=None, help="semi-structured N:M sparsity, N kept of every M (e.g. 2:4)")
    p.add_argument("--bits", type=int, default=4, help="weight bits, 2..8 (default 4)")
    p.add_argument("--alpha", type=float, default=0.5, help="OBR's α in (0, 1) (default 0.5)")
    p.add_argument(
        "--rotate", action="store_true", help="Hadamard-rotate the residual stream first (Llama family)"
    )
    p.add_argument("--calib", default="pydoc", help="pydoc (default) or a UTF-8 text file")
    p.add_argument("--nsamples", type=int, default=128, help="calibration blocks (default 128)")
    p.add_argument("--seed", type=int, default=0, help="which calibration blocks are drawn (default 0)")
    p.add_argument("--skip", nargs="*", default=["lm_head"], help="module names kept in full precision")
    _model_args(p)


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="local model directory (e.g. the output of compress) or hub id"
    )
    p.add_argument("--data", default="pydoc", help="pydoc (held-out topics, default) or a UTF-8 text file")
    p.add_argument("--out", default=None, help="metrics file (default: <model>/metrics.json)")
    _model_args(p)


app = paper_cli(
    slug="obr",
    model_key="lm.model",  # model=<id or path> sets it (None: reproduce takes no user model)
    peers_key="bench",  # peers=true|false sets it
    title="OBR: Optimal Brain Restoration for joint quantization and sparsification of LLMs (ICLR 2026)",
    description="Training-free W4 + 50 % (or 2:4) sparse compression: the kept weights absorb the pruning error, "
    "then one half of them absorbs the quantisation error of the other, in closed form.",
    reproduce="iclr26_obr.reproduce:run",
    verbs=[
        Verb(
            "compress",
            "prune + quantise every decoder Linear of a transformers model with OBR and save it",
            run="iclr26_obr.commands:compress",
            arguments=_compress_args,
        ),
        Verb(
            "evaluate",
            "perplexity of a model on held-out text, written to metrics.json",
            run="iclr26_obr.commands:evaluate",
            arguments=_evaluate_args,
        ),
    ],
)
main = app
