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

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-reasoning-data",
    {
        "tasks": "ReasoningTasks Example FAMILY_NAMES char_tokenizer",
        "plan": "Mixture Stage Plan",
        "data": "StageData build_stage_data masked_lm_loss",
        "runner": "run_plan PlanResult run_grid GridResult",
        "evaluate": "exact_match extract_answer gains",
        "heldout": "overlap drop_eval",
    },
)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only (names re-exported above)
    from .data import StageData, build_stage_data, masked_lm_loss  # noqa: F401
    from .evaluate import exact_match, extract_answer, gains  # noqa: F401
    from .heldout import drop_eval, overlap  # noqa: F401
    from .plan import Mixture, Plan, Stage  # noqa: F401
    from .runner import GridResult, PlanResult, run_grid, run_plan  # noqa: F401
    from .tasks import FAMILY_NAMES, Example, ReasoningTasks, char_tokenizer  # noqa: F401
