"""Where a plan's sources come from: ``pydoc`` (the stdlib's help topics), ``synthetic:<spec>`` (`ReasoningTasks`),
a JSONL file (rows with prompt + answer/completion, or text) or a text file (one document per blank-line-separated
paragraph)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

SYNTHETIC = "synthetic:"


def load_source(spec: str, base: str | Path | None = None, exclude: Sequence[Any] = ()) -> list[Any]:
    """The documents of one source spec (see the module docstring). A relative file path resolves against
    ``base`` (a plan's folder); a synthetic source never samples a problem of ``exclude`` (the evaluation set)."""
    if spec == "pydoc":
        from iclr26_core.corpus import pydoc_topics

        return list(pydoc_topics().values())
    if spec.startswith(SYNTHETIC):
        from .tasks import ReasoningTasks

        kw = parse_synthetic(spec[len(SYNTHETIC) :])
        tasks = ReasoningTasks(
            kw.get("families", "0-7"),
            [kw["template"]] if "template" in kw else kw.get("templates", 2),
            seed=kw.get("seed", 0),
            exclude=exclude,
        )
        return tasks.sample(
            kw.get("n", 10000), corrupt=kw.get("corrupt", 0.0), corruption=kw.get("corruption", "propagated")
        )
    path = Path(spec).expanduser()
    if base is not None and not path.is_absolute():
        path = Path(base) / path
    if not path.is_file():
        raise UserError(
            f"source {spec!r} is neither pydoc, synthetic:<spec> nor an existing file (looked for {str(path)!r})"
        )
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


def parse_synthetic(spec: str) -> dict[str, Any]:
    """``"families=0-7,templates=2,corrupt=0.3,corruption=propagated,n=10000,seed=0"`` (the part after
    ``synthetic:`` in a plan's source) -> keyword arguments; `UserError` for an unknown key or value.
    ``templates=k``: the first k surface templates; ``template=i``: template i only (2: the held-out format)."""
    keys = {
        "families": str,
        "templates": int,
        "template": int,
        "corrupt": float,
        "corruption": str,
        "n": int,
        "seed": int,
    }
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in re.split(r"[,;](?=\s*[a-z_]+=)", spec))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in keys:
            raise UserError(
                f"bad synthetic source {spec!r}: keys are {', '.join(keys)} (key=value, comma-separated)"
            )
        try:
            out[key.strip()] = keys[key.strip()](value.strip())
        except ValueError:
            raise UserError(f"bad synthetic source {spec!r}: {key}={value!r}") from None
    from .tasks import _check_templates, check_corrupt, parse_families

    parse_families(out.get("families", "0-7"))
    _check_templates([out["template"]] if "template" in out else out.get("templates", 2))
    check_corrupt(out.get("corrupt", 0.0), out.get("corruption", "propagated"))
    return out
