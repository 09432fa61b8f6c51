"""Real multiple-choice questions for ``scale=real``: the core's `iclr26_core.realtasks.mc_items`, scored by
continuation (lm-eval's way), and the teacher's option scores cached on disk.

Provenance: `iclr26_core.pretrained.real_text` (Python's own documentation, the pydoc help topics of the running
interpreter), in its disjoint splits ``calib`` → training, ``val`` → validation (temperature, router), ``test``
→ reported; our construction, not a benchmark. Each core item becomes a BOLT item whose ``question`` is the
core's ``context`` (the sentence up to the answer word) and whose options are the four bare words; `TEMPLATE`
scores option k as log p(" " + word_k | question), i.e. the core's ``context + continuations[k]``. ``context``
(pass-1) is empty; ``context_hr`` holds up to two neighbouring sentences of the same paragraph (HR: more of the
same scene), and tmRAG's exemplars are prepended the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .prompts import PromptTemplate

# plain continuation scoring: "[context ]<sentence prefix>" + " <word>"
TEMPLATE = PromptTemplate(user="{question}", chat=False, answer_prefix=" ", context_format="{context} ")


def bolt_items(split: str, n: int, seed: int, kind: str = "next_word") -> list[dict[str, Any]]:
    """``n`` BOLT items from the core's real questions of ``kind`` on ``real_text(split)`` (fewer if it runs out)."""
    from iclr26_core.realtasks import mc_items

    return [
        {
            "id": it["id"],
            "question": it["context"],
            "options": list(it["options"]),
            "answer": int(it["answer"]),
            "context_hr": it["context_hr"],
            "type": it["kind"],
            "shown": it["question"],
            "source": it["source"],
        }
        for it in mc_items(split, n, seed, kind)
    ]


def cached_teacher_scores(
    items: Sequence[dict[str, Any]], key: str, score: Callable[[Sequence[dict[str, Any]]], np.ndarray]
) -> tuple[np.ndarray, bool]:
    """The teacher's option scores [N, K] of ``items``, from the user cache when the same items were scored
    under the same ``key`` (model, template) before, else ``score(items)`` (then stored). Returns (scores, hit)."""
    from iclr26_core.cache import cache_dir
    from iclr26_core.fs import atomic_write_text

    blob = json.dumps([key, [[it["id"], it["question"], it["options"]] for it in items]], sort_keys=True)
    path = cache_dir("bolt", "teacher") / f"{hashlib.sha256(blob.encode()).hexdigest()[:24]}.json"
    if path.is_file():
        return np.array(json.loads(path.read_text())["scores"], dtype=np.float64), True
    s = np.asarray(score(items), dtype=np.float64)
    atomic_write_text(path, json.dumps({"key": key, "n": len(items), "scores": s.tolist()}))
    return s, False
