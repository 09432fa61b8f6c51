"""`OracleLLM`: a synthetic model with a known accuracy law, for exact checks of the search (Tier A).

The law is fixed in the package spec before any run and never tuned to the claims. T tasks in 6 groups, base
logit b_t ~ N(0, 0.5²); M components in the paper's 9 categories with category means μ. Effect of component c on
task t::

    e[c, t] = μ[cat(c)] + g[c] + h[c, group(t)] + ε[c, t],   g, h ~ N(0, 0.08²), ε ~ N(0, 0.04²)

In a prompt the k-th component of one category counts with weight 0.5^(k−1) (redundancy), the component at
position pos of m with weight 1 + 0.1·(1 − 2(pos−1)/(m−1)) (1 for m = 1); each component costs 0.04 (length).
Task phrases (20 per task) act on their task only, effects ~ N(mean e, sd e²), no redundancy, same length cost::

    z_t = b_t + tanh(Σ system terms + Σ task terms),   p_t = 0.25 + 0.75·σ(z_t)

A fitness call draws Binomial(n_questions, p_t) per task; test scores are the exact p_t (an infinite test set).
Paraphrases: 3 per component, effect e·(1 + N(0, 0.1²)). ``transfer(rho, base_shift)`` re-draws g, h, ε as
rho·old + sqrt(1 − rho²)·new (μ shared) and adds ``base_shift`` to every b_t (a stronger model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from iclr26_core.errors import UserError

from .components import CATEGORIES, Component, SystemPrompt
from .fitness import Fitness

CATEGORY_COUNTS = (90, 45, 30, 20, 20, 20, 30, 25, 20)  # of 300 (spec: official pool's shares)
CATEGORY_MEANS = (0.03, 0.02, 0.0, 0.10, 0.0, -0.05, 0.02, -0.02, -0.15)
N_GROUPS = 6
N_PHRASES = 20
N_PARAPHRASES = 3
LENGTH_COST = 0.04


def category_counts(n_components: int) -> list[int]:
    """The 300-component shares scaled to ``n_components`` (largest remainder, at least one per category)."""
    if n_components < len(CATEGORIES):
        raise UserError(f"the oracle needs n_components >= {len(CATEGORIES)}, got {n_components}")
    raw = np.array(CATEGORY_COUNTS, float) * n_components / sum(CATEGORY_COUNTS)
    counts = np.maximum(np.floor(raw).astype(int), 1)
    while counts.sum() < n_components:
        counts[np.argmax(raw - counts)] += 1
    while counts.sum() > n_components:
        counts[np.argmax(np.where(counts > 1, counts - raw, -np.inf))] -= 1
    return counts.tolist()


def prompt_weights(categories: Sequence[str]) -> np.ndarray:
    """Redundancy x position weight of each component of a prompt, given the categories in order."""
    m = len(categories)
    seen: dict[str, int] = {}
    out = np.empty(m)
    for i, cat in enumerate(categories):
        k = seen[cat] = seen.get(cat, 0) + 1
        pos = 1.0 if m == 1 else 1 + 0.1 * (1 - 2 * i / (m - 1))
        out[i] = 0.5 ** (k - 1) * pos
    return out


class OracleLLM:
    """The synthetic model of the spec (see the module docstring)."""

    def __init__(self, n_tasks: int = 47, n_components: int = 300, seed: int = 0) -> None:
        if n_tasks < 1:
            raise UserError(f"the oracle needs n_tasks >= 1, got {n_tasks}")
        self.n_tasks, self.n_components, self.seed = int(n_tasks), int(n_components), int(seed)
        rng = np.random.default_rng(seed)
        self.group = np.zeros(n_tasks, int)
        for gi, part in enumerate(np.array_split(np.arange(n_tasks), N_GROUPS)):
            self.group[part] = gi
        self.b = rng.normal(0, 0.5, n_tasks)
        self.cat = np.repeat(np.arange(len(CATEGORIES)), category_counts(n_components))
        self.mu = np.asarray(CATEGORY_MEANS)
        self.g = rng.normal(0, 0.08, n_components)
        self.h = rng.normal(0, 0.08, (n_components, N_GROUPS))
        self.eps = rng.normal(0, 0.04, (n_components, n_tasks))
        e = self.effects
        self.phrase_effects = rng.normal(e.mean(), e.std(), (n_tasks, N_PHRASES))
        self.paraphrase_mult = 1 + rng.normal(0, 0.1, (n_components, N_PARAPHRASES))
        self._build_names()

    # ------------------------------------------------------------------------------------------- structure
    def _build_names(self) -> None:
        self.task_names = [f"task{t:02d}" for t in range(self.n_tasks)]
        rank: dict[int, int] = {}
        self.components: list[Component] = []
        self._by_text: dict[str, tuple[int, float]] = {}
        for c, k in enumerate(self.cat):
            rank[k] = rank.get(k, 0) + 1
            comp = Component(f"o{c:03d}", f"<{CATEGORIES[k]} #{rank[k]}>", CATEGORIES[k])
            self.components.append(comp)
            self._by_text[comp.text] = (c, 1.0)
            for j in range(N_PARAPHRASES):
                self._by_text[self._paraphrase_text(c, j)] = (c, float(self.paraphrase_mult[c, j]))
        self._phrase = {
            f"[{name}] hint {j:02d}": (t, j)
            for t, name in enumerate(self.task_names)
            for j in range(N_PHRASES)
        }

    def _paraphrase_text(self, c: int, j: int) -> str:
        return f"{self.components[c].text[:-1]} ~{j + 1}>"

    @property
    def effects(self) -> np.ndarray:
        """e[c, t], [M, T]."""
        return self.mu[self.cat][:, None] + self.g[:, None] + self.h[:, self.group] + self.eps

    def paraphraser(self, text: str) -> list[str]:
        """The oracle's 3 paraphrases of a component text (a `paraphraser` for ``sprig``)."""
        c, _ = self._lookup(text)
        return [self._paraphrase_text(c, j) for j in range(N_PARAPHRASES)]

    def cot_prompt(self) -> SystemPrompt:
        """The CoT baseline: the first CoT-category component (fixed, not chosen by fitness)."""
        return SystemPrompt([next(c for c in self.components if c.category == "CoT")])

    def task_phrases(self) -> dict[str, list[str]]:
        """The 20 candidate task phrases of every task (for ``optimize_task_prompts``)."""
        return {name: [f"[{name}] hint {j:02d}" for j in range(N_PHRASES)] for name in self.task_names}

    def _lookup(self, text: str) -> tuple[int, float]:
        if text not in self._by_text:
            raise UserError(f"the oracle has no component {text!r}")
        return self._by_text[text]

    # --------------------------------------------------------------------------------------------- the law
    def system_terms(self, prompts: Sequence[SystemPrompt]) -> np.ndarray:
        """Σ weighted effects − 0.04·m for every prompt and task, [P, T]."""
        length = max((len(p) for p in prompts), default=0)
        idx = np.zeros((len(prompts), max(length, 1)), int)
        w = np.zeros((len(prompts), max(length, 1)))
        for i, p in enumerate(prompts):
            if not p:
                continue
            found = [self._lookup(c.text) for c in p]
            idx[i, : len(p)] = [f[0] for f in found]
            w[i, : len(p)] = prompt_weights([c.category for c in p]) * [f[1] for f in found]
        e = self.effects
        terms = np.einsum("pl,plt->pt", w, e[idx])
        return terms - LENGTH_COST * np.array([len(p) for p in prompts])[:, None]

    def task_terms(self, task_prompts: Mapping[str, Sequence[str]] | None) -> np.ndarray:
        """Σ phrase effects − 0.04·n per task, [T] (a phrase of another task has no effect, only its cost)."""
        out = np.zeros(self.n_tasks)
        for name, phrases in (task_prompts or {}).items():
            if name not in self.task_names:
                raise UserError(f"the oracle has no task {name!r}")
            t = self.task_names.index(name)
            for ph in phrases:
                if ph not in self._phrase:
                    raise UserError(f"the oracle has no task phrase {ph!r}")
                tt, j = self._phrase[ph]
                out[t] += (self.phrase_effects[t, j] if tt == t else 0.0) - LENGTH_COST
        return out

    def accuracy(
        self, prompts: Sequence[SystemPrompt], task_prompts: Mapping[str, Sequence[str]] | None = None
    ) -> np.ndarray:
        """Exact accuracy p_t of every prompt on every task, [P, T]."""
        z = self.b + np.tanh(self.system_terms(prompts) + self.task_terms(task_prompts))
        return 0.25 + 0.75 / (1 + np.exp(-z))

    def expected_accuracy(
        self,
        prompt: SystemPrompt | Sequence[Component] = (),
        task_prompts: Mapping[str, Sequence[str]] | None = None,
    ) -> np.ndarray:
        """Exact accuracy of one system prompt on every task, [T]."""
        return self.accuracy([SystemPrompt(prompt)], task_prompts)[0]

    def true_mean(self, prompt: SystemPrompt | Sequence[Component] = (), task_prompts=None) -> float:
        """Mean exact accuracy over the tasks (what Tier-A claims report)."""
        return float(self.expected_accuracy(prompt, task_prompts).mean())

    def transfer(self, rho: float, base_shift: float = 0.0) -> OracleLLM:
        """Another model: g, h, ε re-drawn as rho·old + sqrt(1 − rho²)·new, μ shared, b += base_shift."""
        if not 0.0 <= rho <= 1.0:
            raise UserError(f"rho must be in [0, 1], got {rho}")
        new = object.__new__(OracleLLM)
        new.__dict__.update(self.__dict__)
        rng = np.random.default_rng([self.seed, 7, round(rho * 1e6), round((base_shift + 100) * 1e6)])
        s = np.sqrt(1 - rho**2)
        new.g = rho * self.g + s * rng.normal(0, 0.08, self.g.shape)
        new.h = rho * self.h + s * rng.normal(0, 0.08, self.h.shape)
        new.eps = rho * self.eps + s * rng.normal(0, 0.04, self.eps.shape)
        new.b = self.b + base_shift
        return new

    # ----------------------------------------------------------------------------------------------- fitness
    def fitness(self, n_questions: int = 10, n_dev: int = 100, seed: int = 0) -> OracleFitness:
        """A noisy `Fitness`: Binomial(n_questions, p_t) per task on train, n_dev on dev, exact p_t on test."""
        return OracleFitness(self, n_questions, n_dev, seed)

    def task_fitness(self, system_prompt: SystemPrompt | None = None, seed: int = 0) -> TaskFitness:
        """Per-task fitness of task prompts under a fixed system prompt (for ``optimize_task_prompts``)."""
        return TaskFitness(self, SystemPrompt(system_prompt or ()), seed)


class OracleFitness(Fitness):
    def __init__(self, oracle: OracleLLM, n_questions: int, n_dev: int, seed: int) -> None:
        super().__init__()
        if n_questions < 1 or n_dev < 1:
            raise UserError(f"n_questions and n_dev must be >= 1, got {n_questions} and {n_dev}")
        self.oracle, self.n_questions, self.n_dev = oracle, int(n_questions), int(n_dev)
        self.task_names = oracle.task_names
        self.rng = np.random.default_rng([oracle.seed, 11, seed])

    def _questions(self, split: str) -> int:
        n = {"train": self.n_questions, "dev": self.n_dev, "test": 0}[split]
        return n * self.oracle.n_tasks

    def _per_task(self, prompts, split):
        p = self.oracle.accuracy(prompts)
        if split == "test":
            return p
        n = self.n_questions if split == "train" else self.n_dev
        return self.rng.binomial(n, p) / n


class TaskFitness(dict):
    """{task: f(list of task prompts, n_questions) -> [P] accuracy}; ``evaluations`` counts questions."""

    def __init__(self, oracle: OracleLLM, system_prompt: SystemPrompt, seed: int) -> None:
        super().__init__()
        self.oracle, self.evaluations = oracle, 0
        self.rng = np.random.default_rng([oracle.seed, 13, seed])
        self.system = oracle.system_terms([SystemPrompt(system_prompt)])[0]
        for t, name in enumerate(oracle.task_names):
            self[name] = self._make(t, name)

    def _make(self, t: int, name: str):
        def score(task_prompts: Sequence[Sequence[str]], n_questions: int | None = 1000) -> np.ndarray:
            terms = np.array([self.oracle.task_terms({name: list(tp)})[t] for tp in task_prompts])
            p = 0.25 + 0.75 / (1 + np.exp(-(self.oracle.b[t] + np.tanh(self.system[t] + terms))))
            n = int(n_questions or 1000)
            self.evaluations += n * len(task_prompts)
            return self.rng.binomial(n, p) / n

        return score
