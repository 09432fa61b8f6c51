"""``iclr26-safemoe``: reproduce the claims; extract a reference routing, fine-tune with SafeMoE, measure drift;
prepare the paper's fine-tuning data and evaluate harmfulness with a judge.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _model_args(p: argparse.ArgumentParser, what: str = "the aligned MoE model") -> None:
    p.add_argument("--model", required=True, help=f"{what}: local directory or hub id")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    p.add_argument("--dtype", default="float32", help="weights dtype: float32 | bfloat16 | float16")
    p.add_argument("--system-prompt", default=None, help="system turn of the chat template (the model's own)")


def _safe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--field", default=None, help="prompt field (default: the one the reference was extracted with)"
    )
    p.add_argument("--n", type=int, default=None, help="first N prompts (default: the reference's N)")


def _extract_args(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument(
        "--prompts", required=True, help="harmful instructions: JSONL, JSON list, CSV/Parquet or hub id"
    )
    p.add_argument("--field", default="instruction", help="field holding the prompt (default instruction)")
    p.add_argument("--n", type=int, default=100, help="use the first N prompts (default 100)")
    p.add_argument("--max-length", type=int, default=256, help="truncate longer prompts, with a warning")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out", required=True, help="new .safetensors file for the reference routing")


def _finetune_args(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument(
        "--train", required=True, help="JSONL with prompt/response (+ system) fields, e.g. from `prepare`"
    )
    p.add_argument("--reference", required=True, help="reference routing from `extract`")
    p.add_argument("--safe-prompts", required=True, help="the file the reference was extracted from")
    _safe_args(p)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--tau", type=float, default=0.1, help="routing-alignment temperature (> 0, default 0.1)")
    p.add_argument(
        "--batch-size", type=int, default=32, help="optimizer batch = per-device batch x grad-accum"
    )
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast for the forward passes (GPU)")
    p.add_argument(
        "--schedule", default="epoch", choices=["epoch", "step"], help="phase (b) per epoch or per step"
    )
    p.add_argument("--every", type=int, default=1, help="with --schedule step: phase (b) every K task steps")
    p.add_argument(
        "--route-grad-clip", type=float, default=None, help="clip phase (b) gradients (default off)"
    )
    p.add_argument("--max-length", type=int, default=512, help="fine-tuning sequence length")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--no-defense", action="store_true", help="plain LoRA SFT (the undefended baseline)")
    p.add_argument("--out", required=True, help="new (or empty) directory for the adapter and logs")


def _drift_args(p: argparse.ArgumentParser) -> None:
    _model_args(p, "the base MoE model")
    p.add_argument("--adapter", help="a LoRA adapter directory from `finetune` (omit: the model itself)")
    p.add_argument("--reference", required=True, help="reference routing from `extract`")
    p.add_argument("--prompts", required=True, help="the file the reference was extracted from")
    _safe_args(p)
    p.add_argument("--tau", type=float, default=1.0, help="temperature of the drift KL (default 1)")
    p.add_argument("--out", required=True, help="new (or empty) directory for drift.json and the figure")


def _prepare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="samsum", choices=["samsum", "sql", "prompt_response"])
    p.add_argument("--task-data", default="knkarthick/samsum", help="file or hub id of the task data")
    p.add_argument("--n-task", type=int, default=5000, help="task rows (default 5000)")
    p.add_argument("--task-offset", type=int, default=0, help="first task row (SQL test rows: 5000)")
    p.add_argument(
        "--harmful-data", default="PKU-Alignment/BeaverTails", help="file or hub id of harmful pairs"
    )
    p.add_argument("--harmful-format", default="beavertails", choices=["beavertails", "prompt_response"])
    p.add_argument("--n-harmful", type=int, default=500, help="harmful (prompt, answer) pairs (default 500)")
    p.add_argument("--out", required=True, help="new JSONL file for D_ft")


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    _model_args(p, "the base MoE model")
    p.add_argument("--adapter", help="a LoRA adapter directory from `finetune` (omit: the model itself)")
    p.add_argument(
        "--prompts", default="JailbreakBench/JBB-Behaviors", help="harmful prompts: file or hub id"
    )
    p.add_argument("--subset", default="behaviors", help="hub dataset config (JBB: behaviors)")
    p.add_argument("--split", default="harmful", help="hub dataset split (JBB: harmful)")
    p.add_argument("--field", default="Goal", help="prompt field (JBB: Goal; safety-only JSON: instruction)")
    p.add_argument("--n", type=int, default=None, help="first N prompts (default all)")
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument(
        "--judge", default="keyword", help="keyword, or a guard model (meta-llama/Llama-Guard-4-12B)"
    )
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--out", required=True, help="new (or empty) directory for generations.jsonl, harmfulness.json"
    )


app = paper_cli(
    slug="safemoe",
    model_key="model",  # model=<id or path> sets it (None: reproduce takes no user model)
    peers_key="peers",  # peers=true|false sets it
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
        Verb(
            "prepare",
            "build the paper's fine-tuning data (SAMSum/SQL task rows + BeaverTails harmful pairs) as JSONL",
            run="iclr26_safemoe.commands_paper:prepare",
            arguments=_prepare_args,
        ),
        Verb(
            "evaluate",
            "harmfulness: greedy answers to harmful prompts (JailbreakBench), judged by keywords or a guard model",
            run="iclr26_safemoe.commands_paper:evaluate",
            arguments=_evaluate_args,
        ),
    ],
)
main = app
