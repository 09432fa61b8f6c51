"""The miniature experiment of one seed: the world, its tokenizer, the teacher, and the three student arms.

Steps: a synthetic world and its train/val/test items (half the training items at high resolution); the
core's byte-level BPE trained on the world's text (every word one token); the noisy-Bayes teacher cached as a
`TeacherCache`; a tiny GPT-2 (2 layers, width 64, 2 heads) trained from the same initialisation and batches by
ODD, SFT and token-level KD; option scores of every arm on the pass-1 test inputs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .scorer import Encoded, OptionScorer, score_encoded
from .student import ARMS, ArmConfig, train_student
from .teacher import TeacherCache
from .world import (
    World,
    bayes_log_posterior,
    context,
    corpus,
    make_world,
    sample_items,
    teacher_scores,
    world_template,
)


@dataclass
class SeedData:
    """Everything one seed's experiments share."""

    seed: int
    world: World
    tokenizer: Any
    scorer: OptionScorer  # tokenises with the miniature's template (its model is the ODD student)
    train: list[dict[str, Any]]
    val: list[dict[str, Any]]
    test: list[dict[str, Any]]
    enc: dict[str, list[Encoded]] = field(default_factory=dict)  # "train", "val/low", "test/high", ...
    cache: TeacherCache | None = None
    models: dict[str, Any] = field(default_factory=dict)
    losses: dict[str, list[float]] = field(default_factory=dict)
    scores: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (arm, encoding key) -> [N, K]

    def arm_scores(self, arm: str, key: str) -> np.ndarray:
        """Raw option scores of ``data.enc[key]`` under arm ``arm`` (computed once)."""
        if (arm, key) not in self.scores:
            self.scores[(arm, key)] = raw_scores(self.models[arm], self.enc[key], self.pad_id)
        return self.scores[(arm, key)]

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)


def gold(items: list[dict[str, Any]]) -> np.ndarray:
    return np.array([it["answer"] for it in items], dtype=np.int64)


def build_tokenizer(world: World, vocab_size: int, seed: int) -> Any:
    """The core's byte-level BPE trained on the world's text; checks that every word is one token."""
    from iclr26_core.tokenizers import train_bpe

    texts = corpus(world, sample_items(world, 400, 0, "tokenizer", high_fraction=1.0))
    tok = train_bpe(vocab_size, seed=seed, texts=texts)
    split = [w for w in world.vocabulary() if len(tok(" " + w, add_special_tokens=False)["input_ids"]) != 1]
    if split:
        raise RuntimeError(f"vocab_size={vocab_size} leaves words split into several tokens: {split[:5]}")
    return tok


def build_student(tokenizer: Any, cfg: Any, seed: int) -> Any:
    from iclr26_core.models import tiny_model

    return tiny_model(
        "gpt2",
        "tiny",
        seed=seed,
        vocab_size=len(tokenizer),
        n_embd=int(cfg.width),
        n_layer=int(cfg.layers),
        n_head=int(cfg.heads),
        n_positions=int(cfg.positions),
    )


def encode(data: SeedData, items: list[dict[str, Any]], view: str | None, order: list[int] | None = None):
    """Encode items at a view ("low", "high", or None: each item's own view), optionally slot-permuted."""
    w, sc = data.world, data.scorer
    return sc.encode_many(
        [(it["question"], it["options"], context(w, it, view or it["view"], order)) for it in items]
    )


def prepare(cfg: Any, seed: int) -> SeedData:
    """World, items, tokenizer, encodings and the teacher cache of one seed."""
    d = cfg.data
    world = make_world(seed, alpha=float(d.alpha))
    train = sample_items(world, int(d.n_train), seed, "train", high_fraction=float(d.high_fraction))
    val = sample_items(world, int(d.n_val), seed, "val")
    test = sample_items(world, int(d.n_test), seed, "test")
    tok = build_tokenizer(world, int(cfg.student.vocab_size), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer = OptionScorer(
            build_student(tok, cfg.student, seed),
            tok,
            template=world_template(tok.eos_token),
            share_prompt=True,
        )
    data = SeedData(seed, world, tok, scorer, train, val, test)
    data.enc["train"] = encode(data, train, None)
    for split, items in (("val", val), ("test", test)):
        data.enc[f"{split}/low"] = encode(data, items, "low")
    # the noisy-Bayes teacher on each training item's own view (what the student sees)
    lp = np.stack([world.log_posterior(it, _vis(it)) for it in train])
    s_t = teacher_scores(lp, seed, tau_kd=float(cfg.teacher.tau_kd), beta=float(cfg.teacher.beta))
    data.cache = TeacherCache.from_scores(
        [it["id"] for it in train], s_t, gold(train).tolist(), float(cfg.teacher.tau_kd), "noisy-bayes"
    )
    return data


def _vis(item: dict[str, Any]) -> list[int]:
    from .world import visible_positions

    return visible_positions(item, item["view"])


def teacher_on(data: SeedData, cfg: Any, items: list[dict[str, Any]], salt: int) -> np.ndarray:
    """The teacher's raw scores on pass-1 inputs of ``items``: [N, K]."""
    lp = bayes_log_posterior(data.world, items, "low")
    return teacher_scores(lp, data.seed * 1000 + salt, float(cfg.teacher.tau_kd), float(cfg.teacher.beta))


def train_arms(data: SeedData, cfg: Any, arms: list[str] | tuple[str, ...] = ARMS, progress: bool = True):
    """Train every arm from the same initialisation on the same batches; fills ``data.models``."""
    tp = data.cache.probs_of(data.train)  # type: ignore[union-attr]
    init = build_student(data.tokenizer, cfg.student, data.seed)
    for arm in arms:
        model = build_student(data.tokenizer, cfg.student, data.seed)
        model.load_state_dict(init.state_dict())
        acfg = ArmConfig(
            arm=arm,
            steps=int(cfg.train.steps),
            batch_size=int(cfg.train.batch_size),
            lr=float(cfg.train.lr),
            grad_clip=float(cfg.train.grad_clip),
            schedule=str(cfg.train.get("schedule", "constant")),
            lambda_kl=float(cfg.odd.lambda_kl),
            lambda_ce=float(cfg.odd.lambda_ce),
            label_smoothing=float(cfg.odd.label_smoothing),
            seed=data.seed,
            progress=progress,
            desc=f"seed {data.seed} {arm}",
        )
        res = train_student(model, data.enc["train"], gold(data.train).tolist(), acfg, teacher_probs=tp,
                            pad_id=data.pad_id)  # fmt: skip
        model.eval()
        data.models[arm] = model
        data.losses[arm] = res.losses
    data.scorer.model = data.models.get("odd", data.scorer.model)


@torch.no_grad()
def raw_scores(model: Any, encoded: list[Encoded], pad_id: int, batch: int = 256) -> np.ndarray:
    """[N, K] summed option log-likelihoods (equal K)."""
    model.eval()
    return torch.stack(score_encoded(model, encoded, pad_id, batch, share_prompt=True)).double().numpy()


@torch.no_grad()
def prompt_embeddings(model: Any, encoded: list[Encoded], pad_id: int, batch: int = 256) -> np.ndarray:
    """Mean-pooled last-layer hidden states over each item's prompt tokens, L2-normalised: [N, d]."""
    model.eval()
    out = []
    for s in range(0, len(encoded), batch):
        chunk = [e.prompt_ids for e in encoded[s : s + batch]]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width))
        for i, p in enumerate(chunk):
            ids[i, : len(p)] = torch.tensor(p)
            mask[i, : len(p)] = 1
        h = model(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True).hidden_states[-1]
        pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        out.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(out).double().numpy()


def softmax(s: np.ndarray, tau: float = 1.0) -> np.ndarray:
    z = s / tau
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
