"""``iclr26-sprig``: reproduce the paper's claims, optimise a system prompt for a model, evaluate one.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="local model directory or hub id (its tokenizer comes with it)"
    )
    p.add_argument(
        "--tasks", required=True, help="task file: JSONL lines {task, question, options, answer, split?}"
    )
    p.add_argument(
        "--scoring",
        choices=["loglik", "generate"],
        default="loglik",
        help="option log-likelihood (default) or generate + parse the letter (the paper's protocol)",
    )
    p.add_argument(
        "--chat-template",
        choices=["auto", "none"],
        default="auto",
        help="auto: the tokenizer's chat template when it has one; none: the plain format",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")


def _optimize_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument(
        "--components", help="component pool CSV with columns text,category (default: the package's)"
    )
    p.add_argument(
        "--algorithm", choices=["beam", "ga"], default="beam", help="beam: SPRIG (default); ga: sprig_ga"
    )
    p.add_argument(
        "--budget", type=int, help="question-evaluations the search may use (default: n-iters only)"
    )
    p.add_argument("--n-iters", type=int, default=10, help="beam iterations / GA generations (default 10)")
    p.add_argument("--beam-size", type=int, default=10, help="beam size k (default 10)")
    p.add_argument("--top-ucb", type=int, default=60, help="components ADD tries per iteration (default 60)")
    p.add_argument(
        "--n-questions", type=int, default=10, help="train questions per task per score (default 10)"
    )
    p.add_argument(
        "--paraphraser",
        help="turns SUB on (and the GA's rephrase): module:function (f(text) -> list[str]) or lm:PATH (a local "
        "causal LM samples 10 paraphrases); default off",
    )
    p.add_argument(
        "--proposer",
        help="the GA's LLM operators (add_useful, add_useless, refine_subset, rephrase): module:function "
        "(g(op, prompt) -> SystemPrompt | None) or lm:PATH; default: offline fallbacks (needs --algorithm ga)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="new (or empty) output directory")


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--system-prompt", required=True, help="a text file holding the system prompt")
    p.add_argument(
        "--split", choices=["train", "dev", "test"], default="test", help="questions to score (default test)"
    )


app = paper_cli(
    slug="sprig",
    model_key="lm.model",  # model=<id or path> sets it (None: reproduce takes no user model)
    peers_key="bench",  # peers=true|false sets it
    title="SPRIG: system prompt optimisation by an edit-based genetic search (ICLR 2026)",
    description="One system prompt, built from a pool of components, that raises a model's accuracy across "
    "many tasks.",
    reproduce="iclr26_sprig.reproduce:run",
    verbs=[
        Verb(
            "optimize",
            "search a system prompt for a model on a task file; writes best_prompt.txt, history.csv, metrics.json",
            run="iclr26_sprig.commands:optimize",
            arguments=_optimize_args,
        ),
        Verb(
            "evaluate",
            "per-task accuracy of a system prompt (and of the empty one) on a task file, as JSON",
            run="iclr26_sprig.commands:evaluate",
            arguments=_evaluate_args,
        ),
    ],
)
main = app
