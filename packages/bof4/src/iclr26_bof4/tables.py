"""The shipped codebook tables (``data/codebooks.json``) as plain data; no torch, no package imports.

"published": the paper's Table 6 levels at I = 64 (BOF4/BOF4-S × MSE/MAE, AF4) and bitsandbytes' NF4
float32 constants; "derived": our own data-driven codebooks for I ∈ {32, 128, 256}. :mod:`.codebooks` serves
them by name; :mod:`.derive` starts its Lloyd iteration from :func:`nf4_levels`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=1)
def shipped() -> dict[str, Any]:
    """The parsed ``data/codebooks.json`` (cached; treat as read-only)."""
    text = (
        resources.files("iclr26_bof4").joinpath("data").joinpath("codebooks.json").read_text(encoding="utf-8")
    )
    return json.loads(text)


def nf4_levels() -> list[float]:
    """The 16 NF4 levels (bitsandbytes' float32 constants), ascending."""
    return list(shipped()["published"]["codebooks"]["nf4"])
