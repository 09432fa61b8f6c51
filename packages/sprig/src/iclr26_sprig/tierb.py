"""Tier B: a tiny real `transformers` LM with a planted system-prompt effect, for claim C6 ("the loop improves a
real model").

Four task types share 24 single-character keys; each task type has a fixed random key → option map (A-D). 24
instruction phrases we wrote are each one token of a character tokenizer; per seed 4 are secretly helpful, 4
harmful, 16 neutral. Training text ``"S: <0-3 phrases>\\nQ: <task> <key>\\nA: <letter>\\n"`` with the correct letter
when a helpful and no harmful phrase is present, else the distractor (correct + 1) mod 4 — so the empty prompt is
misled and a search that finds a helpful phrase gains. The loss is on the answer letter only; AdamW through
`iclr26_core.train`. Questions are split 60/40 by key: the search scores train keys, C6 reports test keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .components import CATEGORIES, Component
from .tasks import MCQuestion, MCTask

PHRASES = (
    "Be precise.",
    "Think first.",
    "Stay calm.",
    "Check twice.",
    "Be brief.",
    "Read closely.",
    "Go slowly.",
    "Trust facts.",
    "Be honest.",
    "Use logic.",
    "Stay on topic.",
    "Be thorough.",
    "Be bold.",
    "Ask why.",
    "Keep it simple.",
    "Mind the clues.",
    "Be careful.",
    "Weigh options.",
    "Be confident.",
    "Stay neutral.",
    "Recall the rule.",
    "Answer now.",
    "Focus hard.",
    "Double check.",
)
TASKS = ("geo", "bio", "art", "law")
KEYS = "abcdefghijklmnopqrstuvwx"
LETTERS = "ABCD"
TEMPLATE = "S: {system}\nQ: {question}\nA: "  # the answer letter follows as one token


@dataclass
class PlantedWorld:
    """The roles of the phrases and the answer maps of one seed."""

    seed: int
    helpful: set[int]
    harmful: set[int]
    answer: np.ndarray  # [task, key] -> correct option index
    train_keys: list[int]
    test_keys: list[int]

    @classmethod
    def make(cls, seed: int) -> PlantedWorld:
        rng = np.random.default_rng([seed, 2024])
        roles = rng.permutation(len(PHRASES))
        keys = rng.permutation(len(KEYS))
        n_train = round(0.6 * len(KEYS))
        return cls(
            seed=seed,
            helpful=set(roles[:4].tolist()),
            harmful=set(roles[4:8].tolist()),
            answer=rng.integers(0, 4, (len(TASKS), len(KEYS))),
            train_keys=sorted(keys[:n_train].tolist()),
            test_keys=sorted(keys[n_train:].tolist()),
        )

    def label(self, phrases: list[int], task: int, key: int) -> int:
        correct = int(self.answer[task, key])
        good = any(p in self.helpful for p in phrases) and not any(p in self.harmful for p in phrases)
        return correct if good else (correct + 1) % 4

    def example(self, rng: np.random.Generator) -> str:
        k = int(rng.integers(0, 4))
        phrases = rng.choice(len(PHRASES), size=k, replace=False).tolist()
        task, key = int(rng.integers(len(TASKS))), int(rng.integers(len(KEYS)))
        system = " ".join(PHRASES[p] for p in phrases)
        question = f"{TASKS[task]} {KEYS[key]}"
        return (
            TEMPLATE.format(system=system, question=question) + LETTERS[self.label(phrases, task, key)] + "\n"
        )

    def tasks(self) -> list[MCTask]:
        """The four task types; question = "<task> <key>", options A-D, split by key."""
        out = []
        for t, name in enumerate(TASKS):
            qs = [
                MCQuestion(f"{name} {KEYS[k]}", tuple(LETTERS), int(self.answer[t, k]), split)
                for split, keys in (("train", self.train_keys), ("test", self.test_keys))
                for k in keys
            ]
            out.append(MCTask(name, qs))
        return out


def components() -> list[Component]:
    """The 24 phrases as a component pool (categories are labels only: the model knows none)."""
    return [Component(f"p{i:02d}", text, CATEGORIES[i % len(CATEGORIES)]) for i, text in enumerate(PHRASES)]


def tokenizer():
    """A character tokenizer with every phrase added as one token."""
    from iclr26_core.tokenizers import char_tokenizer

    alphabet = string_alphabet()
    tok = char_tokenizer(alphabet)
    tok.add_tokens(list(PHRASES))
    return tok


def string_alphabet() -> str:
    import string

    return string.ascii_letters + string.digits + " .,:;?!'\n-"


def train_model(
    world: PlantedWorld,
    tok: Any,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    n_embd: int,
    n_layer: int,
    seed: int,
    progress: bool = True,
):
    """A gpt2 (dropout 0) trained on the planted text with the loss on the answer letter only."""
    import torch

    from iclr26_core.models import tiny_model
    from iclr26_core.train import TrainConfig, train_lm

    model = tiny_model(
        "gpt2",
        "small",
        seed=seed,
        vocab_size=len(tok),
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=4,
        n_positions=64,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    pad = tok.pad_token_id

    def batch(step: int):
        rng = np.random.default_rng([seed, 99, step])
        texts = [world.example(rng) for _ in range(batch_size)]
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        width = max(len(x) for x in ids)
        x = torch.full((batch_size, width), pad, dtype=torch.long)
        y = torch.full((batch_size, width), -100, dtype=torch.long)
        for r, seq in enumerate(ids):
            x[r, : len(seq)] = torch.tensor(seq)
            y[r, len(seq) - 2] = seq[-2]  # the answer letter (the last token is "\n")
        return x, y

    def loss_fn(m, b):
        x, y = b
        return m(input_ids=x, attention_mask=(x != pad).long(), labels=y).loss

    cfg = TrainConfig(
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        betas=(0.9, 0.999),
        min_lr_ratio=1.0,
        seed=seed,
        device="cpu",
        progress=progress,
        desc="tier B: train tiny LM",
    )
    result = train_lm(model, None, cfg=cfg, loss_fn=loss_fn, batches=batch)
    return model.eval(), result


def fitness_for(model: Any, tok: Any, tasks: list[MCTask], n_questions: int, seed: int):
    """`lm_fitness` in the planted format (the answer letter is one token after "A: ")."""
    from .lm import lm_fitness

    return lm_fitness(
        model,
        tok,
        tasks,
        n_questions=n_questions,
        chat_template=TEMPLATE,
        show_options=False,
        option_prefix="",
        batch_size=256,
        seed=seed,
    )


def run_c6(cfg: Any, seed: int, tick, progress: bool = True) -> dict[str, Any]:
    """Train the planted model, check the planted effect was learned, run ``sprig`` per search seed and score the
    chosen prompts on the held-out keys against the empty prompt."""
    from .commands import quiet_transformers
    from .components import SystemPrompt
    from .search import sprig

    quiet_transformers()
    c = cfg.lm
    world, tok = PlantedWorld.make(seed), tokenizer()
    model, trained = train_model(
        world,
        tok,
        steps=int(c.steps),
        batch_size=int(c.batch_size),
        lr=float(c.lr),
        n_embd=int(c.n_embd),
        n_layer=int(c.n_layer),
        seed=seed,
        progress=progress,
    )
    tick("tier B: trained")
    tasks, pool = world.tasks(), components()
    check = fitness_for(model, tok, tasks, 10**6, seed)
    singles = [SystemPrompt()] + [SystemPrompt([p]) for p in pool]
    train_acc = check(singles, "train")  # every train key: an exact check, not a sample
    best_single = int(train_acc[1:].argmax())
    learned = bool(train_acc[1 + best_single] - train_acc[0] >= float(c.check_margin))
    out: dict[str, Any] = {
        "seed": seed,
        "final_loss": float(np.mean(trained.losses[-20:])) if trained.losses else float("nan"),
        "empty_train": float(train_acc[0]),
        "best_single_train": float(train_acc[1 + best_single]),
        "learned": learned,
        "helpful": sorted(PHRASES[i] for i in world.helpful),
        "harmful": sorted(PHRASES[i] for i in world.harmful),
        "searches": [],
    }
    test = fitness_for(model, tok, tasks, int(c.n_questions), seed)
    out["empty_test"] = float(test([SystemPrompt()], "test")[0])
    for s in c.search_seeds:
        fit = fitness_for(model, tok, tasks, int(c.n_questions), seed * 100 + int(s))
        r = sprig(
            fit, pool, beam_size=int(c.beam_size), top_ucb=int(c.top_ucb), n_iters=int(c.n_iters), seed=int(s)
        )
        roles = [
            "helpful"
            if p.id in {f"p{i:02d}" for i in world.helpful}
            else "harmful"
            if p.id in {f"p{i:02d}" for i in world.harmful}
            else "neutral"
            for p in r.best
        ]
        out["searches"].append(
            {
                "search_seed": int(s),
                "prompt": r.best.render(),
                "roles": roles,
                "test": float(test([r.best], "test")[0]),
                "evaluations": r.evaluations,
            }
        )
        tick(f"tier B: sprig seed {s}")
    out["gain"] = float(np.mean([x["test"] for x in out["searches"]]) - out["empty_test"])
    return out


def run_c6_user(cfg: Any, device: str, tick) -> dict[str, Any]:
    """C6 on the user's model (``lm.model``) and task file (``lm.tasks``): sprig vs the empty prompt on test."""
    from iclr26_core.errors import UserError
    from iclr26_core.models import load_causal_lm, load_tokenizer

    from .commands import quiet_transformers
    from .components import SystemPrompt, load_components
    from .lm import lm_fitness
    from .search import sprig
    from .tasks import load_tasks

    c = cfg.lm
    quiet_transformers()
    if not c.tasks:
        raise UserError("lm.model is set: give the task file too (lm.tasks=FILE.jsonl)")
    tasks = load_tasks(str(c.tasks))
    model = load_causal_lm(str(c.model)).to(device).eval()
    tok = load_tokenizer(str(c.model))
    pool = load_components(c.components)
    test = lm_fitness(model, tok, tasks, n_questions=int(c.n_questions), scoring=str(c.scoring))
    empty = float(test([SystemPrompt()], "test")[0])
    searches = []
    for s in c.search_seeds:
        fit = lm_fitness(
            model, tok, tasks, n_questions=int(c.n_questions), scoring=str(c.scoring), seed=int(s)
        )
        r = sprig(
            fit, pool, beam_size=int(c.beam_size), top_ucb=int(c.top_ucb), n_iters=int(c.n_iters), seed=int(s)
        )
        searches.append(
            {
                "search_seed": int(s),
                "prompt": r.best.render(),
                "test": float(test([r.best], "test")[0]),
                "evaluations": r.evaluations,
            }
        )
        tick(f"user model: sprig seed {s}")
    return {
        "model": str(c.model),
        "learned": True,
        "empty_test": empty,
        "searches": searches,
        "gain": float(np.mean([x["test"] for x in searches]) - empty),
    }
