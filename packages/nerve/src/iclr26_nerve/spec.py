"""What NerVE hooks in one architecture (`ArchSpec`) and how a dotted path finds a module (`get_path`).

The bottom of the package's FFN lookup: `detect` (FFNs found by module names) and `registry` (known
architectures, the lookup users call) both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchSpec:
    """Dotted paths: ``blocks`` from the model root; the others relative to one block."""

    blocks: str
    pre: str
    post: str
    gated: bool = False
    split: str | None = None  # "first_half" | "second_half" of the ``pre`` output (fused projections)
    up: str | None = None  # gated: the up projection (for gated_pre="up")
    up_split: str | None = None
    act: str | None = None  # the activation module (for gated_pre="product_input" and the identity control)


def get_path(root, path: str):
    obj = root
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj
