"""iclr26-sprig: SPRIG, one system prompt for many tasks by an edit-based search — arXiv 2410.14826.

>>> import iclr26_sprig as sp
>>> oracle = sp.OracleLLM(seed=0)                                  # a synthetic model with a known law
>>> result = sp.sprig(oracle.fitness(), oracle.components, n_iters=10)
>>> oracle.true_mean(result.best), result.evaluations
>>> fit = sp.lm_fitness(model, tokenizer, sp.load_tasks("tasks.jsonl"))  # any transformers causal LM
>>> sp.sprig(fit, sp.load_components(), budget=200_000).best.render()

Importing the package does not import torch: the public names below are loaded on first access (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-sprig")

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "CATEGORIES": "components",
    "Component": "components",
    "SystemPrompt": "components",
    "load_components": "components",
    "Fitness": "fitness",
    "OracleLLM": "oracle",
    "SearchResult": "search",
    "sprig": "search",
    "random_search": "search",
    "sprig_ga": "ga",
    "optimize_task_prompts": "task_prompts",
    "MCTask": "tasks",
    "MCQuestion": "tasks",
    "load_tasks": "tasks",
    "lm_fitness": "lm",
}

__all__ = [  # noqa: RUF022 - grouped as in the spec
    "__version__",
    "CATEGORIES",
    "Component",
    "SystemPrompt",
    "load_components",
    "Fitness",
    "OracleLLM",
    "SearchResult",
    "sprig",
    "random_search",
    "sprig_ga",
    "optimize_task_prompts",
    "MCTask",
    "MCQuestion",
    "load_tasks",
    "lm_fitness",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .components import CATEGORIES, Component, SystemPrompt, load_components
    from .fitness import Fitness
    from .ga import sprig_ga
    from .lm import lm_fitness
    from .oracle import OracleLLM
    from .search import SearchResult, random_search, sprig
    from .task_prompts import optimize_task_prompts
    from .tasks import MCQuestion, MCTask, load_tasks

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
