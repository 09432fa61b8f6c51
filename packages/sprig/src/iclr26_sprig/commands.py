"""The user-facing verbs ``optimize`` and ``evaluate`` (the method on the user's own model and tasks)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError


def quiet_transformers() -> None:
    """No weight-loading progress bars or info chatter from transformers (one line per event is ours)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _load(args: argparse.Namespace, n_questions: int, seed: int = 0, split: str = "train"):
    from iclr26_core.cli import pick_device
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .lm import lm_fitness
    from .tasks import load_tasks

    tasks = load_tasks(args.tasks)
    device = pick_device(args.device)
    quiet_transformers()
    model = load_causal_lm(args.model).to(device).eval()
    tok = load_tokenizer(args.model)
    template = False if args.chat_template == "none" else None
    return tasks, lambda n=n_questions, s=seed, sp=split: lm_fitness(
        model, tok, tasks, n_questions=n, scoring=args.scoring, chat_template=template, seed=s, split=sp
    )


def _by_task(names: list[str], hits, task_of) -> dict[str, float]:
    import numpy as np

    n = np.bincount(task_of, minlength=len(names))
    acc = np.bincount(task_of, weights=hits, minlength=len(names)) / np.maximum(n, 1)
    return dict(zip(names, map(float, acc), strict=True))


def _per_task(fit, prompts, split: str) -> list[dict[str, float]]:
    scores = fit.per_task(prompts, split)
    return [dict(zip(fit.task_names, map(float, row), strict=True)) for row in scores]


def optimize(args: argparse.Namespace) -> int:
    from iclr26_core.cli import pick_device
    from iclr26_core.fs import atomic_write_text, check_out_dir, staged_dir, write_json

    from .components import SystemPrompt, load_components
    from .intervals import paired_gain_ci
    from .operators import load_operator
    from .search import sprig
    from .tasks import small_data_warnings

    out = check_out_dir(args.out)
    for name in ("n_iters", "beam_size", "top_ucb", "n_questions"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.proposer and args.algorithm != "ga":
        raise UserError("--proposer drives the GA's LLM operators: add --algorithm ga")
    pool = load_components(args.components)
    tasks, make = _load(args, args.n_questions, args.seed)
    warnings = small_data_warnings(tasks)  # printed after the run (an error stays one line)
    paraphraser = load_operator(args.paraphraser, "paraphraser", pick_device(args.device))
    proposer = load_operator(args.proposer, "proposer", pick_device(args.device))
    fit = make()
    if args.algorithm == "beam":
        result = sprig(
            fit,
            pool,
            beam_size=args.beam_size,
            top_ucb=args.top_ucb,
            n_iters=args.n_iters,
            budget=args.budget,
            paraphraser=paraphraser,
            seed=args.seed,
        )
    else:
        from .ga import sprig_ga

        result = sprig_ga(
            fit,
            pool,
            generations=args.n_iters,
            budget=args.budget,
            n_real=args.beam_size,
            proposer=proposer,
            paraphraser=paraphraser,
            seed=args.seed,
        )
    test = make()
    hits, task_of = test.correct([SystemPrompt(), result.best], "test")
    empty, best = (_by_task(test.task_names, h, task_of) for h in hits)
    gain, lo, hi = paired_gain_ci(hits[0], hits[1], task_of, seed=args.seed)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["step", "prompt", "score", "evaluations"])
    for h in result.history:
        step = h.get("iteration", h.get("generation"))
        writer.writerow([step, h["best_prompt"].render(), f"{h['best_score']:.4f}", h["evaluations"]])
    metrics: dict[str, Any] = {
        "model": args.model,
        "algorithm": args.algorithm,
        "best_prompt": result.best.render(),
        "dev_score": result.best_score,
        "evaluations": result.evaluations,
        "test_accuracy": {"with_prompt": best, "empty": empty},
        "test_mean": {
            "with_prompt": sum(best.values()) / len(best),
            "empty": sum(empty.values()) / len(empty),
        },
        "test_gain": {"gain": gain, "ci95": [lo, hi], "questions": len(task_of)},
        "warnings": warnings,
        "config": {k: v for k, v in result.config.items() if k != "credits"},
    }
    with staged_dir(out) as tmp:
        atomic_write_text(tmp / "best_prompt.txt", result.best.render() + "\n")
        atomic_write_text(tmp / "history.csv", buf.getvalue())
        write_json(tmp / "metrics.json", metrics)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    print(f"best prompt ({len(result.best)} components): {result.best.render()!r}")
    print(
        f"test accuracy {metrics['test_mean']['with_prompt']:.4f} vs {metrics['test_mean']['empty']:.4f} "
        f"with the empty prompt (gain {100 * gain:+.1f} points, 95% CI [{100 * lo:+.1f}, {100 * hi:+.1f}] over "
        f"{len(task_of)} test questions) · {result.evaluations} question-evaluations · {out}"
    )
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from .components import Component, SystemPrompt

    path = Path(args.system_prompt).expanduser()
    if not path.is_file():
        raise UserError(f"system prompt file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8").strip()
    prompt = SystemPrompt([Component("user", text, "user")]) if text else SystemPrompt()
    _, make = _load(args, 10)
    fit = make()
    with_prompt, empty = _per_task(fit, [prompt, SystemPrompt()], args.split)
    result = {
        "split": args.split,
        "system_prompt": text,
        "tasks": {t: {"with_prompt": with_prompt[t], "empty": empty[t]} for t in fit.task_names},
        "mean": {
            "with_prompt": sum(with_prompt.values()) / len(with_prompt),
            "empty": sum(empty.values()) / len(empty),
        },
        "questions": fit.cost(1, args.split),
    }
    print(json.dumps(result, indent=2))
    return 0
