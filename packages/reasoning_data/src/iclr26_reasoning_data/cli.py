"""``iclr26-reasoning-data``: reproduce the paper's claims; write/check a plan; run a multi-stage plan on your
model; generate synthetic reasoning data; evaluate exact match. Nothing here imports torch."""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", metavar="PLAN.yaml", help="validate a plan and print its stages")
    p.add_argument(
        "--preset",
        choices=["cpu", "smoke"],
        default="cpu",
        help="the example plan to write when --check is not given (default cpu)",
    )
    p.add_argument(
        "--move",
        action="append",
        metavar="SOURCE:TOKENS:FROM:TO",
        help="move tokens of a source between stages (token-controlled; repeatable)",
    )
    p.add_argument("--out", help="write the (moved) plan to this YAML file")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, help="plan YAML (iclr26-reasoning-data plan --out plan.yaml)")
    p.add_argument(
        "--model",
        required=True,
        help="local model directory or hub id (its own tokenizer), or tiny-llama for a random init",
    )
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--max-new-tokens", type=int, default=24)


def _generate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--families", default="0-7", help="task families, e.g. 0-7 or 0,3 (default 0-7)")
    p.add_argument(
        "--templates",
        type=int,
        default=2,
        choices=[1, 2, 3],
        help="the first k surface templates (default 2)",
    )
    p.add_argument(
        "--template", type=int, choices=[0, 1, 2], help="one surface template only (2: the held-out format)"
    )
    p.add_argument(
        "--held-out",
        type=int,
        metavar="PER_FAMILY",
        help="write the evaluation set instead: the first PER_FAMILY held-out problems of each family (clean)",
    )
    p.add_argument("--n", type=int, default=10000, help="number of examples")
    p.add_argument("--corrupt", type=float, default=0.0, help="fraction of corrupted traces in [0, 1]")
    p.add_argument("--corruption", default="propagated", help="propagated | missing_steps | wrong_final")
    p.add_argument("--seed", type=int, default=0, help="the sampling seed")
    p.add_argument(
        "--heldout-seed",
        type=int,
        default=0,
        help="fixes the held-out registry: problems never sampled for training, whatever --seed (default 0)",
    )
    p.add_argument("--out", required=True, help="JSONL file to write")
    p.add_argument("--force", action="store_true", help="replace an existing file")


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="local model directory or hub id (with its tokenizer)")
    p.add_argument(
        "--data", required=True, help="JSONL rows with prompt and final (or answer), e.g. from generate"
    )
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--out", default="eval.json", help="where to write the result (default eval.json)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


app = paper_cli(
    slug="reasoning_data",
    model_key="model.name",  # model=<id or path> sets it (None: reproduce takes no user model)
    peers_key="peers",  # peers=true|false sets it
    title="Front-Loading Reasoning: where reasoning data belongs in the training pipeline (ICLR 2026)",
    description="Token-controlled pretraining/SFT data-allocation studies on Hugging Face causal LMs.",
    reproduce="iclr26_reasoning_data.reproduce:run",
    verbs=[
        Verb(
            "plan",
            "write an example stage plan, or check one; move tokens between stages",
            run="iclr26_reasoning_data.commands:plan",
            arguments=_plan_args,
        ),
        Verb(
            "run",
            "run a multi-stage plan on your causal LM (checkpoints, tokens.json, eval.json)",
            run="iclr26_reasoning_data.commands:run",
            arguments=_run_args,
        ),
        Verb(
            "generate",
            "write synthetic multi-step reasoning data (JSONL) with diversity/quality knobs",
            run="iclr26_reasoning_data.commands:generate",
            arguments=_generate_args,
        ),
        Verb(
            "evaluate",
            "exact match of a model's final answers on a JSONL set (eval.json)",
            run="iclr26_reasoning_data.commands:evaluate",
            arguments=_evaluate_args,
        ),
    ],
)
main = app
