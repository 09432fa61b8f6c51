"""Atomic file and directory writes: nothing half-written is ever left behind.

* `atomic_write_text` / `write_json`: temp file in the same directory, then `os.replace`.
* `staged_dir(final)`: build a whole output directory under a hidden temporary name next to ``final``
  and rename it into place only when the block succeeds; on any error the temporary directory is removed.
* `check_out_dir(path)`: refuse an existing non-empty output directory (one clear `UserError`).

And the reading side of a user's JSON-lines file: `read_jsonl` (every mistake one `UserError` naming the line).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import UserError


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers never see half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def jsonable(x: Any) -> Any:
    """Plain-JSON version of nested dicts/lists of numbers, numpy/torch values, paths; NaN/inf as strings."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if hasattr(x, "tolist"):  # numpy / torch scalars and arrays
        return jsonable(x.tolist())
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    if isinstance(x, Path):
        return str(x)
    return x


def write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(jsonable(data), indent=2) + "\n")


def read_jsonl(path: str | Path, what: str = "file") -> list[tuple[str, dict[str, Any]]]:
    """``(where, row)`` for each non-blank line of a user's JSON-lines file, ``where`` = ``"<name> line <n>"``
    (for the caller's own checks of a row). One `UserError` when the file is missing (``"<what> '<path>' does
    not exist"``), a line is not JSON or not a JSON object, or there is no row (``"<what> '<path>' is empty"``)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"{what} {str(path)!r} does not exist")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected a JSON object, got {type(row).__name__}")
        rows.append((where, row))
    if not rows:
        raise UserError(f"{what} {str(path)!r} is empty")
    return rows


def check_out_dir(path: str | Path) -> Path:
    """``path`` as a Path if it does not exist or is an empty directory; else a `UserError`."""
    path = Path(path).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UserError(f"output path {str(path)!r} exists and is not a directory")
        if any(path.iterdir()):
            raise UserError(f"output directory {str(path)!r} is not empty; choose a new one")
    return path


@contextlib.contextmanager
def staged_dir(final: str | Path) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``final`` when the block exits without an error.

    ``final`` must not exist or be an empty directory (checked first). The temporary directory sits
    next to ``final`` (same file system, so the rename is atomic) and is removed on failure.
    """
    final = check_out_dir(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            final.rmdir()  # empty, checked above
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
