"""SPRIG's edit operators and the UCB score that picks which components ADD tries (arXiv 2410.14826, Sec. 3).

For a prompt s = (c_1..c_m) and the top components ``top`` by UCB:

* ADD  — each c in top (not already in s) inserted at each of the m+1 positions: (m+1)·|top| children;
* DEL  — remove one component: m children;
* SWAP — exchange the components at positions i < j: m(m−1)/2 children;
* SUB  — replace a component by one of its paraphrases (only with a paraphraser).

Credit (step 4): ADD of c gives credit(c) += f(child) − f(parent); DEL of c gives credit(c) += f(parent) − f(child).
UCB(c) = mean_credit(c) + sqrt(2·ln(Σ_j n_j) / n_c); components never tried rank first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .components import Component, SystemPrompt


@dataclass(frozen=True)
class Edit:
    """How a child came from its parent: ``op`` in ADD/DEL/SWAP/SUB and the component it is credited to."""

    op: str
    component: str | None = None


def add_children(prompt: SystemPrompt, top: Sequence[Component]) -> list[tuple[SystemPrompt, Edit]]:
    present = {c.identity for c in prompt}
    out = []
    for c in top:
        if c.identity in present:
            continue
        for pos in range(len(prompt) + 1):
            out.append((SystemPrompt((*prompt[:pos], c, *prompt[pos:])), Edit("ADD", c.identity)))
    return out


def del_children(prompt: SystemPrompt) -> list[tuple[SystemPrompt, Edit]]:
    return [
        (SystemPrompt((*prompt[:i], *prompt[i + 1 :])), Edit("DEL", prompt[i].identity))
        for i in range(len(prompt))
    ]


def swap_children(prompt: SystemPrompt) -> list[tuple[SystemPrompt, Edit]]:
    out = []
    for i in range(len(prompt)):
        for j in range(i + 1, len(prompt)):
            p = list(prompt)
            p[i], p[j] = p[j], p[i]
            out.append((SystemPrompt(p), Edit("SWAP")))
    return out


def sub_children(
    prompt: SystemPrompt, paraphrases: Callable[[Component], Sequence[Component]]
) -> list[tuple[SystemPrompt, Edit]]:
    out = []
    for i, c in enumerate(prompt):
        for alt in paraphrases(c):
            if alt.text != c.text:
                out.append((SystemPrompt((*prompt[:i], alt, *prompt[i + 1 :])), Edit("SUB", c.identity)))
    return out


def enumerate_edits(
    prompt: SystemPrompt,
    top: Sequence[Component],
    paraphrases: Callable[[Component], Sequence[Component]] | None = None,
) -> list[tuple[SystemPrompt, Edit]]:
    """Every ADD/DEL/SWAP(/SUB) child of ``prompt`` with its edit, in that order (not deduplicated)."""
    out = add_children(prompt, top) + del_children(prompt) + swap_children(prompt)
    if paraphrases is not None:
        out += sub_children(prompt, paraphrases)
    return out


class CreditTable:
    """Per-component credit sums and counts; `ucb` and `top` implement step 4 of the search."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def add(self, component: str, credit: float) -> None:
        self.total[component] = self.total.get(component, 0.0) + float(credit)
        self.count[component] = self.count.get(component, 0) + 1

    def record(self, edit: Edit, parent_score: float, child_score: float) -> None:
        if edit.op == "ADD":
            self.add(edit.component, child_score - parent_score)
        elif edit.op == "DEL":
            self.add(edit.component, parent_score - child_score)

    def ucb(self, component: str) -> float:
        """mean credit + sqrt(2 ln N / n_c); +inf for a component never tried."""
        n_c = self.count.get(component, 0)
        if n_c == 0:
            return math.inf
        n = sum(self.count.values())
        return self.total[component] / n_c + math.sqrt(2 * math.log(n) / n_c)

    def top(self, components: Sequence[Component], k: int, rng: np.random.Generator) -> list[Component]:
        """The ``k`` components with the highest UCB (ties, e.g. among untried ones, in random order)."""
        order = rng.permutation(len(components))
        scores = np.array([self.ucb(components[i].identity) for i in order])
        ranked = order[np.argsort(-scores, kind="stable")]
        return [components[i] for i in ranked[:k]]

    def as_dict(self) -> Mapping[str, tuple[float, int]]:
        return {c: (self.total[c], self.count[c]) for c in self.total}
