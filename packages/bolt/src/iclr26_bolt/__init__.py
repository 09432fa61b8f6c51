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

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-bolt",
    {
        "scorer": "OptionScorer",
        "prompts": "PromptTemplate",
        "teacher": "TeacherCache",
        "odd": "odd_loss",
        "distill": "distill",
        "calibration": "fit_temperature",
        "features": "router_features",
        "router": "BudgetRouter Action",
        "metrics": "decision_metrics",
        "token_kd": "token_ce_loss",
    },
)
