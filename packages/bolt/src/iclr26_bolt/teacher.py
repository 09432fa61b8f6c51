"""The teacher cache: the teacher's option scores and p_T = softmax(s_T/τ_kd), computed once, stored as JSONL.

One line per item: ``{"id", "scores", "probs", "gold", "tau_kd", "teacher"}``. Distillation reads the cache,
so the teacher and the student never need to be loaded at the same time (offline distillation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from iclr26_core.errors import UserError
from iclr26_core.fs import read_jsonl

from .items import check_items, write_jsonl

FIELDS = ("id", "scores", "probs", "gold", "tau_kd", "teacher")


def teacher_probs(scores: Sequence[float] | torch.Tensor, tau_kd: float = 2.0) -> list[float]:
    """softmax(s/τ_kd) as a list of floats."""
    s = torch.as_tensor(scores, dtype=torch.float64)
    return torch.softmax(s / float(tau_kd), dim=-1).tolist()


class TeacherCache(Mapping[str, dict[str, Any]]):
    """A mapping id → entry ``{"scores", "probs", "gold", "tau_kd", "teacher"}``."""

    def __init__(self, entries: dict[str, dict[str, Any]], path: Path | None = None) -> None:
        self.entries = entries
        self.path = path

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self.entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @staticmethod
    def entry(
        item_id: str, scores: Sequence[float], gold: int | None, tau_kd: float, teacher: str
    ) -> dict[str, Any]:
        s = [float(x) for x in (scores.tolist() if hasattr(scores, "tolist") else scores)]
        return {
            "id": str(item_id),
            "scores": s,
            "probs": teacher_probs(s, tau_kd),
            "gold": None if gold is None else int(gold),
            "tau_kd": float(tau_kd),
            "teacher": teacher,
        }

    @classmethod
    def from_scores(
        cls,
        ids: Sequence[str],
        scores: Sequence[Sequence[float]],
        gold: Sequence[int | None],
        tau_kd: float = 2.0,
        teacher: str = "teacher",
    ) -> TeacherCache:
        """A cache from scores computed elsewhere (e.g. a synthetic teacher)."""
        if tau_kd <= 0:
            raise UserError(f"tau_kd must be > 0, got {tau_kd}")
        entries = {}
        for i, s, y in zip(ids, scores, gold, strict=True):
            entries[str(i)] = cls.entry(str(i), s, y, tau_kd, teacher)
        return cls(entries)

    @classmethod
    def build(
        cls, scorer: Any, items: Iterable[dict[str, Any]], path: str | Path, tau_kd: float = 2.0
    ) -> TeacherCache:
        """Score every item with the teacher's `OptionScorer` and write the JSONL cache to ``path``."""
        from .scorer import load_image

        if tau_kd <= 0:
            raise UserError(f"tau_kd must be > 0, got {tau_kd}")
        items = check_items(items)
        entries = {}
        was = scorer.model.training
        scorer.model.eval()
        try:
            from iclr26_core.cli import progress

            for it in progress(items, desc="teacher scores"):
                enc = scorer.encode(
                    it["question"], it["options"], load_image(it.get("image")), it.get("context")
                )
                s = scorer.scores([enc])[0].detach().float().cpu()
                entries[it["id"]] = cls.entry(it["id"], s, it.get("answer"), tau_kd, scorer.name)
        finally:
            scorer.model.train(was)
        cache = cls(entries)
        cache.save(path)
        return cache

    def save(self, path: str | Path) -> Path:
        self.path = write_jsonl(path, self.entries.values())
        return self.path

    @classmethod
    def load(cls, path: str | Path) -> TeacherCache:
        entries: dict[str, dict[str, Any]] = {}
        for where, row in read_jsonl(path, "teacher cache"):
            missing = [f for f in ("id", "scores", "probs") if f not in row]
            if missing:
                raise UserError(f"teacher cache {where}: missing fields {missing}")
            if len(row["scores"]) != len(row["probs"]) or not all(
                math.isfinite(float(p)) and p >= 0 for p in row["probs"]
            ):
                raise UserError(f"teacher cache {where}: bad probabilities")
            entries[str(row["id"])] = row
        return cls(entries, Path(path))

    def check(self, items: Sequence[dict[str, Any]]) -> None:
        """Every item has an entry with as many probabilities as it has options (else one `UserError`)."""
        missing = [it["id"] for it in items if it["id"] not in self.entries]
        if missing:
            shown = ", ".join(repr(m) for m in missing[:3]) + (" ..." if len(missing) > 3 else "")
            raise UserError(f"the teacher cache lacks {len(missing)} item id(s): {shown}")
        for it in items:
            k = len(self.entries[it["id"]]["probs"])
            if k != len(it["options"]):
                raise UserError(
                    f"item {it['id']!r} has {len(it['options'])} options but its teacher entry has {k} probabilities"
                )

    def probs_of(self, items: Sequence[dict[str, Any]]) -> list[torch.Tensor]:
        self.check(items)
        return [torch.tensor(self.entries[it["id"]]["probs"], dtype=torch.float32) for it in items]
