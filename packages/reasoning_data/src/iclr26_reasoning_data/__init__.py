"""iclr26-reasoning-data: where reasoning data belongs in the training pipeline (Front-Loading Reasoning,
Akter et al., ICLR 2026, arXiv 2510.03264) as a tool for token-controlled data-allocation studies.

>>> import iclr26_reasoning_data as rd
>>> tasks = rd.ReasoningTasks(seed=0)
>>> plan = rd.Plan([rd.Stage("pretrain", rd.Mixture({"pydoc": 2, "reasoning": 1}, tokens=1_228_800)),
...                 rd.Stage("sft", rd.Mixture({"sft": 1}, tokens=60_000, packing="example"),
...                          loss="answer_only", lr=1e-3)])
>>> moved = plan.move_tokens("reasoning", 409_600, "pretrain", "sft")   # same pretraining total
>>> result = rd.run_plan(model, plan, sources, tokenizer, seed=0)
>>> rd.exact_match(result.model, tokenizer, tasks.eval_set(100))["mean"]

Importing the package does not import torch: the names below load on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-reasoning-data")

_EXPORTS: dict[str, str] = {
    "ReasoningTasks": "tasks",
    "Example": "tasks",
    "FAMILY_NAMES": "tasks",
    "char_tokenizer": "tasks",
    "Mixture": "plan",
    "Stage": "plan",
    "Plan": "plan",
    "StageData": "data",
    "build_stage_data": "data",
    "masked_lm_loss": "data",
    "run_plan": "runner",
    "PlanResult": "runner",
    "run_grid": "runner",
    "GridResult": "runner",
    "exact_match": "evaluate",
    "extract_answer": "evaluate",
    "gains": "evaluate",
}

__all__ = [  # noqa: RUF022 - grouped by module
    "__version__",
    "ReasoningTasks",
    "Example",
    "FAMILY_NAMES",
    "char_tokenizer",
    "Mixture",
    "Stage",
    "Plan",
    "StageData",
    "build_stage_data",
    "masked_lm_loss",
    "run_plan",
    "PlanResult",
    "run_grid",
    "GridResult",
    "exact_match",
    "extract_answer",
    "gains",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover
    from .data import StageData, build_stage_data, masked_lm_loss
    from .evaluate import exact_match, extract_answer, gains
    from .plan import Mixture, Plan, Stage
    from .runner import GridResult, PlanResult, run_grid, run_plan
    from .tasks import FAMILY_NAMES, Example, ReasoningTasks, char_tokenizer

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
