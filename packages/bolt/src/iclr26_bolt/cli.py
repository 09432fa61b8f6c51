"""``iclr26-bolt``: reproduce the paper's claims; cache a teacher, distill a student, answer with routing.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _cache_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="teacher: local model directory or hub id (tiny-gpt2 to try)"
    )
    p.add_argument(
        "--data", required=True, help="items JSONL: {id, question, options, answer?, image?, type?}"
    )
    p.add_argument("--out", required=True, help="new teacher cache JSONL file")
    p.add_argument(
        "--tau-kd", type=float, default=2.0, help="teacher temperature: p_T = softmax(s/tau) (2.0)"
    )
    p.add_argument("--batch-size", type=int, default=8, help="sequences per forward pass (default 8)")


def _distill_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--student", required=True, help="student: local model directory or hub id")
    p.add_argument("--data", required=True, help="training items JSONL")
    p.add_argument("--cache", required=True, help="teacher cache JSONL (from cache-teacher)")
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    p.add_argument("--val", help="validation items JSONL (with answers): fits the temperature and the router")
    p.add_argument(
        "--target-cost", type=float, default=0.5, help="router: target mean extra cost (default 0.5)"
    )
    p.add_argument("--budget", type=float, default=2.0, help="router budget incl. pass-1 (default 2.0)")
    p.add_argument("--lr", type=float, default=2e-4, help="AdamW learning rate (default 2e-4)")
    p.add_argument("--grad-accum", type=int, default=8, help="items per optimizer step (default 8)")
    p.add_argument("--epochs", type=int, default=1, help="epochs over the items (default 1)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (overrides --epochs)")
    p.add_argument("--qd-tokens", type=int, default=128, help="new tokens per QD decomposition (default 128)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")


def _answer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a directory written by `distill`")
    p.add_argument("--data", required=True, help="items JSONL")
    p.add_argument("--out", required=True, help="new predictions JSONL (summary.json is written beside it)")
    p.add_argument("--budget", type=float, default=2.0, help="budget incl. pass-1 = 1.0 (default 2.0)")
    p.add_argument("--qd-tokens", type=int, default=128, help="new tokens per QD decomposition (default 128)")


app = paper_cli(
    slug="bolt",
    peers_key='bench',  # peers=true|false sets it
    title="BOLT: decision-aligned distillation and budget-aware routing for multiple-choice QA (ICLR 2026)",
    description="Option-level decision distillation (ODD) from a cached teacher, and a calibrated router that "
    "spends extra inference (HR, tmRAG, QD) only where it pays.",
    reproduce="iclr26_bolt.reproduce:run",
    verbs=[
        Verb("cache-teacher", "score every item's options with the teacher; write the JSONL cache",
             run="iclr26_bolt.commands:cache_teacher", arguments=_cache_args),
        Verb("distill", "LoRA + ODD on a student from a teacher cache; temperature and router with --val",
             run="iclr26_bolt.commands:distill_cmd", arguments=_distill_args),
        Verb("answer", "answer items with a distilled student and the budget-aware router",
             run="iclr26_bolt.commands:answer", arguments=_answer_args),
    ],
)  # fmt: skip
main = app
