"""``iclr26-safemoe``: reproduce the claims; extract a reference routing, fine-tune with SafeMoE, measure drift.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _extract_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the aligned MoE model: local directory or hub id")
    p.add_argument("--prompts", required=True, help="JSONL file of harmful instructions")
    p.add_argument(
        "--field", default="instruction", help="JSONL field holding the prompt (default instruction)"
    )
    p.add_argument("--n", type=int, default=100, help="use the first N prompts (default 100)")
    p.add_argument("--max-length", type=int, default=256, help="truncate longer prompts, with a warning")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out", required=True, help="new .safetensors file for the reference routing")


def _finetune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the aligned MoE model: local directory or hub id")
    p.add_argument("--train", required=True, help="JSONL with prompt/response fields (the user's data)")
    p.add_argument("--reference", required=True, help="reference routing from `extract`")
    p.add_argument("--safe-prompts", required=True, help="the JSONL the reference was extracted from")
    p.add_argument("--field", default="instruction", help="prompt field of --safe-prompts")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--tau", type=float, default=0.1, help="routing-alignment temperature (> 0, default 0.1)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--no-defense", action="store_true", help="plain LoRA SFT (the undefended baseline)")
    p.add_argument("--out", required=True, help="new (or empty) directory for the adapter and logs")


def _drift_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the base MoE model: local directory or hub id")
    p.add_argument("--adapter", help="a LoRA adapter directory from `finetune` (omit: the model itself)")
    p.add_argument("--reference", required=True, help="reference routing from `extract`")
    p.add_argument("--prompts", required=True, help="the JSONL the reference was extracted from")
    p.add_argument("--field", default="instruction")
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--tau", type=float, default=1.0, help="temperature of the drift KL (default 1)")
    p.add_argument("--out", required=True, help="new (or empty) directory for drift.json and the figure")


app = paper_cli(
    slug="safemoe",
    title="SafeMoE: safe fine-tuning of MoE LLMs by aligning harmful-input routing (ICLR 2026)",
    description="Keep an aligned MoE model's routing of harmful prompts in place during LoRA fine-tuning.",
    reproduce="iclr26_safemoe.reproduce:run",
    verbs=[
        Verb(
            "extract",
            "record the aligned model's router logits at t* for harmful prompts",
            run="iclr26_safemoe.commands:extract",
            arguments=_extract_args,
        ),
        Verb(
            "finetune",
            "LoRA fine-tuning with SafeMoE's routing-alignment pass (or --no-defense)",
            run="iclr26_safemoe.commands:finetune",
            arguments=_finetune_args,
        ),
        Verb(
            "drift",
            "per-layer routing drift of a fine-tuned model from the reference",
            run="iclr26_safemoe.commands:drift",
            arguments=_drift_args,
        ),
    ],
)
main = app
