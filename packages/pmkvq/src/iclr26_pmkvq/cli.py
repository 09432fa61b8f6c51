"""``iclr26-pmkvq``: reproduce the paper's claims; calibrate, evaluate and generate on a user's model.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _bits_list(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated bit-widths such as 2,4, got {value!r}"
        ) from None


def _model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="local model directory or hub id (Llama, Qwen2, Mistral, Phi-3, Qwen3)"
    )


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    _model_arg(p)
    p.add_argument(
        "--budget-mb", type=float, required=True, help="total KV budget of all blocks, MiB per sequence"
    )
    p.add_argument("--max-len", type=int, required=True, help="the longest sequence the budget must hold")
    p.add_argument(
        "--bit-choices", type=_bits_list, default=[2, 4], help="bit-widths to choose from (default 2,4)"
    )
    p.add_argument(
        "--calib", default="pydoc", help="'pydoc' (Python's own docs) or a text file (default pydoc)"
    )
    p.add_argument("--calib-samples", type=int, default=8, help="calibration samples (default 8)")
    p.add_argument("--calib-len", type=int, default=2048, help="tokens per calibration sample (default 2048)")
    p.add_argument(
        "--effective-len", type=int, default=8192, help="positional interpolation target (default 8192)"
    )
    p.add_argument("--no-reparam", action="store_true", help="skip the K/Q reparameterisation")
    p.add_argument("--window", type=int, default=128, help="full-precision window (default 128)")
    p.add_argument(
        "--group-size", type=int, default=None, help="channels per group (default min(128, head_dim))"
    )
    p.add_argument("--out", required=True, help="new (or empty) output directory")


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    _model_arg(p)
    p.add_argument("--plan", required=True, help="a directory written by `calibrate`")
    p.add_argument("--data", default="pydoc", help="'pydoc' (held-out topics) or a text file (default pydoc)")
    p.add_argument("--length", type=int, default=1024, help="tokens per evaluation text (default 1024)")
    p.add_argument("--texts", type=int, default=1, help="number of texts, decoded as one batch (default 1)")
    p.add_argument(
        "--out", help="directory for metrics.json and memory_trace.png (default: the plan directory)"
    )


def _generate_args(p: argparse.ArgumentParser) -> None:
    _model_arg(p)
    p.add_argument("--plan", required=True, help="a directory written by `calibrate`")
    p.add_argument("--prompt", required=True, help="the prompt text")
    p.add_argument("--max-new-tokens", type=int, default=256, help="tokens to generate (default 256)")


app = paper_cli(
    slug="pmkvq",
    model_key="model.name",  # model=<id or path> sets it (None: reproduce takes no user model)
    peers_key="bench",  # peers=true|false sets it
    title="PM-KVQ: progressive mixed-precision KV cache quantization for long-CoT LLMs (ICLR 2026)",
    description="A transformers KV cache that fits a byte budget per block by halving its bit-width "
    "16 -> 8 -> 4 -> 2 with an exact integer shift; budgets from a sensitivity-weighted 0/1 program; "
    "calibration with positional interpolation.",
    reproduce="iclr26_pmkvq.reproduce:run",
    verbs=[
        Verb(
            "calibrate",
            "calibrate PM-KVQ on a model: plan.json (bits and bytes per block) and rep_scales.safetensors",
            run="iclr26_pmkvq.commands:calibrate",
            arguments=_calibrate_args,
        ),
        Verb(
            "evaluate",
            "teacher-forced decoding: FP cache vs PM-KVQ vs fixed bits at equal bytes (KL, PPL, peak bytes)",
            run="iclr26_pmkvq.commands:evaluate",
            arguments=_evaluate_args,
        ),
        Verb(
            "generate",
            "generate text with a plan's cache and print the bytes used per block",
            run="iclr26_pmkvq.commands:generate",
            arguments=_generate_args,
        ),
    ],
)
main = app
