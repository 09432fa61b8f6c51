"""Multiple-choice items: validation and JSONL input/output.

An item is a dict ``{"id", "question", "options": [...], "answer": int?, "image": path?, "type": str?,
"context": str?}``. ``answer`` is the index of the gold option (optional at inference). Every user mistake
(fewer than 2 options, duplicate options, gold out of range, an empty file, a repeated id ...) is a
`UserError` of one line naming the item.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError


def check_options(options: Sequence[str], where: str = "item") -> list[str]:
    """The options as a list of strings; at least 2, none empty, no duplicates (after stripping)."""
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise UserError(f"{where}: 'options' must be a list of strings, got {type(options).__name__}")
    opts = list(options)
    if len(opts) < 2:
        raise UserError(f"{where}: needs at least 2 options, got {len(opts)}")
    if not all(isinstance(o, str) and o.strip() for o in opts):
        raise UserError(f"{where}: every option must be a non-empty string")
    stripped = [o.strip() for o in opts]
    dupes = sorted({o for o in stripped if stripped.count(o) > 1})
    if dupes:
        raise UserError(f"{where}: duplicate options {dupes}")
    return opts


def check_item(item: Any, where: str = "item") -> dict[str, Any]:
    """Validate one item dict (see the module docstring); returns it with ``id`` as a string."""
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(item).__name__}")
    for key in ("id", "question", "options"):
        if key not in item:
            raise UserError(f"{where}: missing field {key!r}")
    where = f"{where} (id {item['id']!r})"
    if not isinstance(item["question"], str):
        raise UserError(f"{where}: 'question' must be a string")
    opts = check_options(item["options"], where)
    out = dict(item, id=str(item["id"]), options=opts)
    gold = item.get("answer")
    if gold is not None:
        if isinstance(gold, bool) or not isinstance(gold, int):
            raise UserError(f"{where}: 'answer' must be the index of the gold option, got {gold!r}")
        if not 0 <= gold < len(opts):
            raise UserError(f"{where}: gold answer {gold} is out of range for {len(opts)} options")
    return out


def check_items(items: Iterable[Any], where: str = "items") -> list[dict[str, Any]]:
    """Validate a collection of items: non-empty, each valid, ids unique."""
    out = [check_item(it, f"{where}[{i}]") for i, it in enumerate(items)]
    if not out:
        raise UserError(f"{where}: no items")
    seen: set[str] = set()
    for it in out:
        if it["id"] in seen:
            raise UserError(f"{where}: item id {it['id']!r} appears twice")
        seen.add(it["id"])
    return out


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate items from a JSONL file (one JSON object per line; blank lines skipped)."""
    from iclr26_core.fs import read_jsonl as rows_of

    return check_items([row for _, row in rows_of(path, "data file")], Path(path).name)


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    from iclr26_core.fs import jsonable

    return "".join(json.dumps(jsonable(r)) + "\n" for r in rows)


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write rows as JSONL atomically (a temporary file, then a rename)."""
    from iclr26_core.fs import atomic_write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, jsonl_text(rows))
    return path
