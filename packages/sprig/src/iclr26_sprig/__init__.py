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

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-sprig",
    {
        "components": "CATEGORIES Component SystemPrompt load_components",
        "fitness": "Fitness",
        "oracle": "OracleLLM",
        "search": "SearchResult sprig random_search",
        "ga": "sprig_ga",
        "task_prompts": "optimize_task_prompts",
        "tasks": "MCTask MCQuestion load_tasks",
        "lm": "lm_fitness",
    },
)
