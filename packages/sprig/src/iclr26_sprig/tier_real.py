"""``scale=real``: SPRIG on a real instruct model (SmolLM2-135M-Instruct from the core's ``pretrained``) and real
multiple-choice tasks built from real text (`iclr26_sprig.realtasks`), against the model's default system prompt,
the per-task task-prompt baseline and the GA, all at SPRIG's question-evaluation budget; held-out test gains with
paired, task-stratified 95% bootstrap intervals (`iclr26_sprig.intervals`).

Scoring: through the model's chat template, the system turn holding the prompt; each option's continuation in
the assistant turn is scored by Σ log p (`iclr26_sprig.realtasks`: continuation and question formats), one
question at a time with a key-value cache (the template and system prompt are computed once per prompt). With no
system prompt SmolLM2's template inserts its own default system prompt ("You are a helpful AI assistant named
SmolLM ..."): that is the "default" arm. A headroom gate fixed before the run (the default prompt's held-out
accuracy between ``real.gate_low`` and ``real.gate_high``) decides whether the claims can be decided.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .components import Component, SystemPrompt, load_components
from .intervals import paired_gain_ci

# our own candidate task prompts (they open the user turn) per task type, for the task-prompt baseline
_CONTINUE = [
    "Continue the text.",
    "Complete the sentence:",
    "Here is the start of a sentence from Python's documentation.",
    "Write the next word of this sentence.",
    "Continue this technical description.",
    "Finish the sentence naturally.",
]
TASK_PHRASES = {
    "next_word": _CONTINUE,
    "cloze_prefix": _CONTINUE,
    "cloze_question": [
        "Read the whole sentence before choosing.",
        "Answer with the missing word only.",
        "The missing word is one of the four options.",
        "Think about the meaning of the sentence.",
        "Pick the word that makes the sentence grammatical.",
        "This sentence comes from Python's documentation.",
    ],
}


def small_pool(per_category: int) -> list[Component]:
    """The first ``per_category`` components of every category of the package's pool."""
    seen: dict[str, int] = {}
    out = []
    for c in load_components():
        if seen.get(c.category, 0) < per_category:
            seen[c.category] = seen.get(c.category, 0) + 1
            out.append(c)
    return out


def task_fitness(fit: Any, system: SystemPrompt) -> Any:
    """{task: score(list of phrase lists, n) -> [P]} on ``fit``'s model, one shared question sample per call."""

    class Scores(dict):
        evaluations = 0

    out = Scores()
    for k, task in enumerate(fit.tasks):

        def score(task_prompts, n, k=k, task=task):
            pool = task.splits["train"]
            n = min(int(n or len(pool)), len(pool))
            sample = [[] for _ in fit.tasks]
            sample[k] = [pool[i] for i in fit.rng.choice(len(pool), n, replace=False)]
            accs = []
            for tp in task_prompts:
                fit.task_prompts = {task.name: " ".join(tp)}
                hits, _ = fit._correct([system], sample)
                accs.append(float(hits.mean()))
            fit.task_prompts = {}
            out.evaluations += n * len(task_prompts)
            return np.array(accs)

        out[task.name] = score
    return out


def run_real(cfg: Any, tick) -> dict[str, Any]:
    import torch

    from iclr26_core.pretrained import load_smollm2

    from .commands import quiet_transformers
    from .ga import sprig_ga
    from .lm import lm_fitness
    from .realtasks import real_tasks
    from .search import sprig
    from .task_prompts import optimize_task_prompts

    quiet_transformers()
    r = cfg.real
    seed = int(cfg.seed)
    model, tok = load_smollm2(dtype=torch.float32)
    tasks = real_tasks(int(r.n_train), int(r.n_test), seed, list(r.task_types))
    pool = small_pool(int(r.per_category))
    tick("real: model and tasks")

    def fit(s: int):
        return lm_fitness(
            model,
            tok,
            tasks,
            n_questions=int(r.n_questions),
            show_options=False,
            kv_cache=True,
            seed=s,
        )

    s = sprig(
        fit(seed),
        pool,
        beam_size=int(r.beam_size),
        top_ucb=int(r.top_ucb),
        n_iters=int(r.n_iters),
        seed=seed,
    )
    budget = s.evaluations
    tick("real: sprig")
    gfit, n_real = fit(seed + 1), int(r.ga_n_real)
    first = gfit.cost(len(pool) + n_real) + gfit.cost(n_real + 1, "dev")  # the GA's first generation
    ga_budget = max(budget, first)
    g = sprig_ga(gfit, pool, generations=int(r.ga_generations), n_real=n_real, budget=ga_budget, seed=seed)
    tick("real: sprig_ga")
    tf = task_fitness(fit(seed + 2), SystemPrompt())
    tp = optimize_task_prompts(
        tf, TASK_PHRASES, budget=budget, z=float(cfg.task_opt.z), max_len=int(r.task_max_len)
    )
    tick("real: task prompts")
    test = fit(seed + 3)
    hits, task_of = test.correct([SystemPrompt(), s.best, g.best], "test")
    test.task_prompts = {k: " ".join(v) for k, v in tp.items()}
    tp_hits, _ = test.correct([SystemPrompt()], "test")
    arms = {"default": hits[0], "sprig": hits[1], "sprig_ga": hits[2], "task_prompts": tp_hits[0]}
    tick("real: test")
    out: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF dequantised, float32)",
        "gate": {"chance": 0.25, "low": float(r.gate_low), "high": float(r.gate_high)},
        "tasks": {t.name: {k: len(v) for k, v in t.splits.items()} for t in tasks},
        "pool_size": len(pool),
        "budget": budget,
        "ga_budget": ga_budget,  # the GA's first generation may need more than SPRIG used
        "evaluations": {"sprig": s.evaluations, "sprig_ga": g.evaluations, "task_prompts": tf.evaluations},
        "prompts": {"sprig": s.best.render(), "sprig_ga": g.best.render(), "task_prompts": tp},
        "test_questions": len(task_of),
        "accuracy": {},
        "accuracy_per_task": {},
        "gain_vs_default": {},
    }
    for name, h in arms.items():
        per_task = {tasks[t].name: float(h[task_of == t].mean()) for t in np.unique(task_of)}
        out["accuracy_per_task"][name] = per_task
        out["accuracy"][name] = float(np.mean(list(per_task.values())))
        if name != "default":
            gain, lo, hi = paired_gain_ci(arms["default"], h, task_of, seed=seed)
            out["gain_vs_default"][name] = {"gain": gain, "ci95": [lo, hi]}
    d, lo, hi = paired_gain_ci(arms["task_prompts"], arms["sprig"], task_of, seed=seed)
    out["sprig_minus_task_prompts"] = {"gain": d, "ci95": [lo, hi]}
    return out
