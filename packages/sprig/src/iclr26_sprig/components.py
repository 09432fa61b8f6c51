"""The search space of SPRIG: prompt components and system prompts built from them.

A system prompt s = (c_1, ..., c_m) is an ordered tuple of components, rendered joined by single spaces into the
model's system slot (Zhang et al., arXiv 2410.14826, Sec. 3). The package ships its own pool
(``data/components.csv``: 90 sentences we wrote, 10 in each of the paper's 9 categories); the official pool is
not licensed for redistribution. A user pool is a CSV with columns ``text,category``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from iclr26_core.errors import UserError

#: the paper's 9 component categories (Sec. 3.1), in the order the oracle's category means use
CATEGORIES = (
    "good_property",
    "role",
    "style",
    "CoT",
    "emotion",
    "safety",
    "behavioral",
    "scenario",
    "jailbreak",
)


@dataclass(frozen=True)
class Component:
    """One prompt component. ``source`` is the id a paraphrase keeps for credit (None: itself)."""

    id: str
    text: str
    category: str
    source: str | None = None

    @property
    def identity(self) -> str:
        """The id edits are credited to: a paraphrase counts as its source component."""
        return self.source or self.id


class SystemPrompt(tuple):
    """An immutable ordered tuple of `Component`; ``SystemPrompt()`` is the empty prompt."""

    def __new__(cls, components: Iterable[Component] = ()) -> SystemPrompt:
        return super().__new__(cls, tuple(components))

    def render(self, sep: str = " ") -> str:
        """The text that goes into the system slot."""
        return sep.join(c.text for c in self)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self)

    def __repr__(self) -> str:
        return f"SystemPrompt({list(self.ids)})"


def _read_rows(text: str, origin: str) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip() for f in reader.fieldnames or []]
    if "text" not in fields or "category" not in fields:
        raise UserError(
            f"component file {origin}: needs the columns text,category (found {','.join(fields)})"
        )
    return [{k.strip(): (v or "").strip() for k, v in row.items() if k} for row in reader]


def load_components(
    path: str | Path | None = None, categories: Sequence[str] | None = None
) -> list[Component]:
    """The component pool: the package's own (``path=None``) or a user CSV with columns ``text,category``.

    ``categories`` (default: the paper's nine) are the allowed category names; an unknown one, an empty text,
    a duplicate text or an empty pool is a `UserError` (one line).
    """
    if path is None:
        origin = "iclr26_sprig/data/components.csv"
        text = resources.files("iclr26_sprig").joinpath("data", "components.csv").read_text(encoding="utf-8")
    else:
        p = Path(path).expanduser()
        origin = str(p)
        if not p.is_file():
            raise UserError(f"component file {origin!r} does not exist")
        text = p.read_text(encoding="utf-8")
    allowed = tuple(categories or CATEGORIES)
    out: list[Component] = []
    seen: set[str] = set()
    for i, row in enumerate(_read_rows(text, origin), start=2):
        if not row.get("text"):
            raise UserError(f"component file {origin}, line {i}: empty text")
        if row.get("category") not in allowed:
            raise UserError(
                f"component file {origin}, line {i}: unknown category {row.get('category')!r} "
                f"(choose one of {', '.join(allowed)})"
            )
        if row["text"] in seen:
            raise UserError(f"component file {origin}, line {i}: duplicate component {row['text']!r}")
        seen.add(row["text"])
        out.append(Component(id=f"c{len(out):03d}", text=row["text"], category=row["category"]))
    return check_pool(out, origin)


def check_pool(components: Sequence[Component], origin: str = "the component pool") -> list[Component]:
    """The pool as a list; an empty pool or duplicate ids are a `UserError`."""
    components = list(components)
    if not components:
        raise UserError(f"{origin} is empty: SPRIG needs at least one component")
    ids = [c.id for c in components]
    if len(set(ids)) != len(ids):
        raise UserError(f"{origin} has duplicate component ids")
    return components


def parse_prompt(text: str, components: Sequence[Component], sep: str = "\n") -> SystemPrompt:
    """The `SystemPrompt` whose ``render(sep)`` is ``text`` (each part must be a pool text)."""
    by_text = {c.text: c for c in components}
    parts = [p.strip() for p in text.split(sep) if p.strip()]
    unknown = [p for p in parts if p not in by_text]
    if unknown:
        raise UserError(f"prompt part {unknown[0]!r} is not a component of the pool")
    return SystemPrompt(by_text[p] for p in parts)
