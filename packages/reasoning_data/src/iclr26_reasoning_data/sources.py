"""Where a plan's sources come from: ``pydoc`` (the stdlib's help topics), ``synthetic:<spec>`` (`ReasoningTasks`),
a JSONL file (rows with prompt + answer/completion, or text) or a text file (one document per blank-line-separated
paragraph)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

SYNTHETIC = "synthetic:"


def load_source(spec: str) -> list[Any]:
    """The documents of one source spec (see the module docstring)."""
    if spec == "pydoc":
        from iclr26_core.corpus import pydoc_topics

        return list(pydoc_topics().values())
    if spec.startswith(SYNTHETIC):
        from .tasks import ReasoningTasks, parse_synthetic

        kw = parse_synthetic(spec[len(SYNTHETIC) :])
        tasks = ReasoningTasks(kw.get("families", "0-7"), kw.get("templates", 2), seed=kw.get("seed", 0))
        return tasks.sample(
            kw.get("n", 10000), corrupt=kw.get("corrupt", 0.0), corruption=kw.get("corruption", "propagated")
        )
    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserError(f"source {spec!r} is neither pydoc, synthetic:<spec> nor an existing file")
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    text = path.read_text(errors="replace")
    docs = [d for d in text.split("\n\n") if d.strip()]
    if not docs:
        raise UserError(f"source file {spec!r} is empty")
    return docs


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; `UserError` with the line number for a row that is not a JSON object."""
    from iclr26_core.fs import read_jsonl as rows_of

    return [row for _, row in rows_of(path)]
