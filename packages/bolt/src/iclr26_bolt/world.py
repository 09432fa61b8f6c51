"""The synthetic multiple-choice world with a known posterior (numpy, seeded).

8 objects (option strings of 1–3 words), 32 observation words, 3 question templates ("types"). Each object o
has a word distribution φ_o ~ Dirichlet(α·1) (α = 1.0). An item: the gold object o*, 4 options (o* and 3
random others, shuffled), 6 words drawn i.i.d. from φ_{o*}. Pass-1 ("low resolution") shows the first 2 words
and "?" for the rest; high resolution (the HR action) shows all 6. The Bayes posterior over the options on the
visible words is p*(k) ∝ Π_i φ_{o_k}(w_i) (uniform prior).

The teacher is a noisy Bayes reader: s_T(k) = τ_kd·[log p*(k) + Gumbel(0, β_T)] (raw scores over-confident
by τ_kd, as summed LM scores are), β_T = 1.0, so p_T = softmax(s_T/τ_kd) = softmax(log p* + G).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .prompts import PromptTemplate

OBJECTS = (
    "cup",
    "red block",
    "green bowl",
    "small metal can",
    "sponge",
    "blue toy car",
    "wooden spoon",
    "plate",
)
WORDS = (
    "round", "flat", "shiny", "soft", "heavy", "light", "tall", "short",
    "smooth", "rough", "hollow", "solid", "bright", "dark", "wet", "dry",
    "warm", "cold", "thin", "thick", "curved", "square", "striped", "plain",
    "glossy", "matte", "narrow", "wide", "dusty", "clean", "bent", "sharp",
)  # fmt: skip
TYPES = {
    "identify": "which object is on the table ?",
    "grasp": "what is the robot holding ?",
    "scene": "what does the camera see ?",
}
HIDDEN = "?"


def world_template(eos: str) -> PromptTemplate:
    """The miniature's prompt: the observation ("image"), the options, the question, the answer cue.

    The option text is followed by the EOS token, so an option's score includes the end of the answer."""
    return PromptTemplate(
        user="{context}options: {options}\nq: {question}\na:",
        chat=False,
        answer_prefix=" ",
        answer_suffix=eos,
        context_format="image: {context}\n",
    )


@dataclass
class World:
    phi: np.ndarray  # [n_objects, n_words] word distributions
    objects: tuple[str, ...]
    words: tuple[str, ...]
    seed: int

    def vocabulary(self) -> list[str]:
        """Every word that appears in the world's texts (each must be one token)."""
        ws = set(self.words) | {w for o in self.objects for w in o.split()}
        ws |= {w for q in TYPES.values() for w in q.split()}
        ws.add(HIDDEN)
        return sorted(ws)

    def log_posterior(self, item: dict[str, Any], visible: list[int]) -> np.ndarray:
        """log p*(k) over the item's options given the observation words at positions ``visible``: [K]."""
        words = [item["obs"][i] for i in visible]
        ll = np.log(self.phi[np.asarray(item["objects"])][:, words]).sum(axis=1)
        return ll - np.logaddexp.reduce(ll)


def make_world(seed: int, alpha: float = 1.0, n_objects: int = 8, n_words: int = 32) -> World:
    if not 2 <= n_objects <= len(OBJECTS) or not 2 <= n_words <= len(WORDS):
        raise ValueError(f"n_objects <= {len(OBJECTS)} and n_words <= {len(WORDS)}")
    rng = np.random.default_rng([seed, 7])
    phi = rng.dirichlet(np.full(n_words, float(alpha)), size=n_objects)
    return World(phi, OBJECTS[:n_objects], WORDS[:n_words], seed)


def sample_items(
    world: World,
    n: int,
    seed: int,
    split: str,
    *,
    n_obs: int = 6,
    n_visible: int = 2,
    n_options: int = 4,
    high_fraction: float = 0.0,
) -> list[dict[str, Any]]:
    """``n`` items; a share ``high_fraction`` is shown at high resolution (``view="high"``)."""
    rng = np.random.default_rng([world.seed, seed, sum(map(ord, split))])
    n_obj = len(world.objects)
    types = list(TYPES)
    items = []
    for i in range(n):
        gold_obj = int(rng.integers(n_obj))
        others = rng.choice([o for o in range(n_obj) if o != gold_obj], size=n_options - 1, replace=False)
        objs = [gold_obj, *map(int, others)]
        order = rng.permutation(n_options)
        objs = [objs[j] for j in order]
        obs = rng.choice(len(world.words), size=n_obs, p=world.phi[gold_obj]).tolist()
        kind = types[int(rng.integers(len(types)))]
        items.append(
            {
                "id": f"{split}-{i}",
                "question": TYPES[kind],
                "options": [world.objects[o] for o in objs],
                "answer": objs.index(gold_obj),
                "type": kind,
                "objects": objs,
                "obs": obs,
                "n_visible": n_visible,
                "view": "high" if rng.random() < high_fraction else "low",
            }
        )
    return items


def visible_positions(item: dict[str, Any], view: str) -> list[int]:
    return list(range(len(item["obs"]))) if view == "high" else list(range(item["n_visible"]))


def context(world: World, item: dict[str, Any], view: str, order: list[int] | None = None) -> str:
    """The observation text: visible words and "?" for hidden ones; ``order`` permutes the slots (QD)."""
    shown = set(visible_positions(item, view))
    slots = [world.words[w] if i in shown else HIDDEN for i, w in enumerate(item["obs"])]
    if order is not None:
        slots = [slots[j] for j in order]
    return " ".join(slots)


def bayes_log_posterior(world: World, items: list[dict[str, Any]], view: str) -> np.ndarray:
    """[N, K] log posteriors of the items at a view ("low" or "high")."""
    return np.stack([world.log_posterior(it, visible_positions(it, view)) for it in items])


def teacher_scores(log_post: np.ndarray, seed: int, tau_kd: float = 2.0, beta: float = 1.0) -> np.ndarray:
    """s_T = τ_kd·(log p* + Gumbel(0, β)): [N, K]."""
    rng = np.random.default_rng([seed, 11])
    return tau_kd * (log_post + rng.gumbel(0.0, beta, size=log_post.shape))


def corpus(world: World, items: list[dict[str, Any]]) -> list[str]:
    """Texts to train the tokenizer on: the items' prompts and answers plus every word many times."""
    texts = [" ".join(world.vocabulary()) for _ in range(50)]
    for it in items:
        ctx = context(world, it, "high")
        texts.append(
            f"image: {ctx}\noptions: {', '.join(it['options'])}\nq: {it['question']}\na: {it['options'][0]}"
        )
    return texts
