"""iclr26-bolt: BOLT — option-level decision distillation (ODD) and budget-aware test-time routing (bTTA)
for multiple-choice QA (ICLR 2026, OpenReview Vsy3nAnaX6).

>>> import iclr26_bolt as bolt
>>> scorer = bolt.OptionScorer(model, tokenizer)
>>> s = scorer.score("Which object?", ["cup", "red block", "plate"])      # option log-likelihoods [K]
>>> cache = bolt.TeacherCache.build(teacher_scorer, items, "cache.jsonl")  # p_T = softmax(s_T / 2)
>>> student = bolt.distill(student, tokenizer, items, cache)              # LoRA + ODD loss
>>> router = bolt.BudgetRouter(budget=2.0).fit(val_features, val_labels)

Importing the package does not import torch: the public names are loaded on first access (PEP 562), so
``iclr26-bolt --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-bolt")

_EXPORTS: dict[str, str] = {
    "OptionScorer": "scorer",
    "PromptTemplate": "prompts",
    "TeacherCache": "teacher",
    "odd_loss": "odd",
    "distill": "distill",
    "fit_temperature": "calibration",
    "router_features": "features",
    "BudgetRouter": "router",
    "Action": "router",
    "decision_metrics": "metrics",
    "token_ce_loss": "token_kd",
}

__all__ = [  # noqa: RUF022 - grouped as in the spec
    "__version__",
    "OptionScorer",
    "PromptTemplate",
    "TeacherCache",
    "odd_loss",
    "distill",
    "fit_temperature",
    "router_features",
    "BudgetRouter",
    "Action",
    "decision_metrics",
    "token_ce_loss",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .calibration import fit_temperature
    from .distill import distill
    from .features import router_features
    from .metrics import decision_metrics
    from .odd import odd_loss
    from .prompts import PromptTemplate
    from .router import Action, BudgetRouter
    from .scorer import OptionScorer
    from .teacher import TeacherCache
    from .token_kd import token_ce_loss

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
