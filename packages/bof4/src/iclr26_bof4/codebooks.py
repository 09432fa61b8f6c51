"""The 4-bit codebooks: published levels (Table 6 of arXiv 2505.06653), ours for other block sizes.

A codebook is 16 ascending levels in [−1, 1] (float32). Names:

============  =================================================================  =========  ===========
name          what                                                               absmax     fixed levels
============  =================================================================  =========  ===========
``nf4``       NormalFloat (QLoRA), bitsandbytes' float32 constants, any I        unsigned   −1, 0, 1
``af4``       AbnormalFloat, I = 64 only (Table 6); n/a for other block sizes    unsigned   −1, 0, 1
``bof4-mse``  BOF4 optimised for the MSE of the original weights                 unsigned   −1, 0, 1
``bof4-mae``  BOF4 optimised for the MAE                                         unsigned   −1, 0, 1
``bof4s-mse`` BOF4-S: signed absmax, MSE (the paper's recommended codebook)      signed     0, 1
``bof4s-mae`` BOF4-S, MAE                                                        signed     0, 1
============  =================================================================  =========  ===========

Sources, in order: the published levels at I = 64 (``data/codebooks.json``, "published"); our own data-driven
codebooks for I ∈ {32, 128, 256} (same file, "derived": weighted Lloyd on 2^24 N(0,1) samples, seed 0);
else derived on demand and cached as JSON under ``iclr26_core.cache.cache_dir("bof4", "codebooks")``
(data-driven with 2^22 samples, seed 0, for I ≤ 16384; by numerical integration above, where 2^22 samples
would give too few blocks).
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError
from iclr26_core.fs import write_json

from .config import AF4_BLOCK_SIZE, BOF4_VARIANTS, CODEBOOK_NAMES, check_block_size, codebook_available
from .tables import shipped

PUBLISHED_BLOCK_SIZE = 64
ON_DEMAND_SAMPLES = 2**22
ON_DEMAND_SEED = 0
ON_DEMAND_THEORY_ABOVE = 2**14  # block sizes above this are derived by integration

__all__ = [
    "BOF4_VARIANTS",
    "CODEBOOK_NAMES",
    "codebook",
    "codebook_info",
    "is_signed",
    "resolve_codebook",
    "validate_levels",
]


def _check_name(name: str) -> str:
    key = str(name).strip().lower()
    if key not in CODEBOOK_NAMES:
        raise UserError(f"unknown codebook {name!r}; choose one of {', '.join(CODEBOOK_NAMES)}")
    return key


def validate_levels(levels: Any, what: str = "codebook") -> list[float]:
    """16 finite, strictly increasing levels in [−1, 1] as a list of floats, else :class:`UserError`."""
    try:
        values = [float(v) for v in (levels.tolist() if hasattr(levels, "tolist") else levels)]
    except (TypeError, ValueError) as exc:
        raise UserError(f"{what} must be 16 numbers ({exc})") from exc
    if len(values) != 16:
        raise UserError(f"{what} must have 16 levels (4 bit), got {len(values)}")
    if not all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in values):
        raise UserError(f"{what} levels must be finite and within [-1, 1]")
    if any(b <= a for a, b in pairwise(values)):
        raise UserError(f"{what} levels must be strictly increasing")
    return values


def is_signed(name_or_levels: Any) -> bool:
    """Signed absmax (BOF4-S) or not.

    Named codebooks: ``bof4s-*`` are signed. A raw codebook (sequence / tensor of 16 levels) is treated as
    signed iff it lacks the level −1: an unsigned-absmax codebook must contain −1 to represent a negative
    block maximum, while a signed-absmax codebook maps the max-magnitude weight to +1 and may leave −1 out.
    """
    if isinstance(name_or_levels, str):
        return _check_name(name_or_levels).startswith("bof4s")
    return -1.0 not in validate_levels(name_or_levels)


def _cache_path(name: str, block_size: int) -> Path:
    from iclr26_core.cache import cache_dir

    return cache_dir("bof4", "codebooks") / f"{name}-I{block_size}.json"


def _read_cache(path: Path) -> list[float] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return validate_levels(data["levels"])
    except (OSError, ValueError, KeyError, TypeError, UserError):
        return None  # missing or corrupt: derive again and overwrite


def _derive_on_demand(name: str, block_size: int) -> list[float]:
    from .derive import derive_codebook  # torch: only when a codebook has to be derived

    metric, signed = BOF4_VARIANTS[name]
    method = "theory" if block_size > ON_DEMAND_THEORY_ABOVE else "empirical"
    levels = derive_codebook(
        block_size,
        metric=metric,
        signed=signed,
        method=method,
        n_samples=ON_DEMAND_SAMPLES,
        seed=ON_DEMAND_SEED,
    )
    return [float(v) for v in levels.tolist()]


def codebook_info(name: str = "bof4s-mse", block_size: int = 64) -> dict[str, Any]:
    """Levels (list of floats) and where they come from: ``{"name", "block_size", "levels", "source"}``.

    Does not import torch unless the codebook has to be derived.
    """
    key = _check_name(name)
    check_block_size(block_size)
    data = shipped()
    published = data["published"]["codebooks"]
    if key == "nf4":
        return {
            "name": key,
            "block_size": block_size,
            "levels": list(published["nf4"]),
            "source": "published",
        }
    if key == "af4":
        if not codebook_available(key, block_size):
            raise UserError(
                f"AF4 is n/a for block_size={block_size}: only the published AF4 at block size "
                f"{AF4_BLOCK_SIZE} is shipped (an unweighted MAE Lloyd run does not regenerate AF4)"
            )
        return {
            "name": key,
            "block_size": block_size,
            "levels": list(published["af4"]),
            "source": "published",
        }
    if block_size == PUBLISHED_BLOCK_SIZE:
        return {"name": key, "block_size": block_size, "levels": list(published[key]), "source": "published"}
    derived = data["derived"]["by_block_size"].get(str(block_size), {})
    if key in derived:
        return {"name": key, "block_size": block_size, "levels": list(derived[key]), "source": "derived"}
    path = _cache_path(key, block_size)
    levels = _read_cache(path)
    if levels is None:
        levels = validate_levels(_derive_on_demand(key, block_size), f"derived codebook {key}")
        metric, signed = BOF4_VARIANTS[key]
        write_json(
            path,
            {
                "name": key,
                "block_size": block_size,
                "metric": metric,
                "signed": signed,
                "method": "theory" if block_size > ON_DEMAND_THEORY_ABOVE else "empirical",
                "n_samples": ON_DEMAND_SAMPLES,
                "seed": ON_DEMAND_SEED,
                "levels": levels,
            },
        )
    return {"name": key, "block_size": block_size, "levels": levels, "source": f"cache:{path}"}


def codebook(name: str = "bof4s-mse", block_size: int = 64):
    """The 16 ascending float32 levels of codebook ``name`` for block size ``block_size`` → torch.Tensor (16,).

    Unknown name, AF4 at a block size other than 64, or block_size < 2 → :class:`UserError`.
    """
    import torch

    return torch.tensor(codebook_info(name, block_size)["levels"], dtype=torch.float32)


def resolve_codebook(spec: Any, block_size: int) -> tuple[Any, bool, str | None]:
    """``(levels float32 (16,), signed, name or None)`` for a codebook name or a raw 16-level codebook."""
    import torch

    if isinstance(spec, str):
        key = _check_name(spec)
        return codebook(key, block_size), is_signed(key), key
    values = validate_levels(spec, "raw codebook")
    return torch.tensor(values, dtype=torch.float32), -1.0 not in values, None


def regenerate_shipped(block_sizes=(32, 128, 256), n_samples: int = 2**24, seed: int = 0) -> dict[str, Any]:
    """Recompute the "derived" section of ``data/codebooks.json`` (our codebooks for other block sizes).

    Data-driven weighted Lloyd (``derive_codebook(method="empirical")``) for the four BOF4 variants. Returns the
    section; the maintainer writes it into the JSON file (nothing is written here).
    """
    from .derive import derive_codebook

    by_block: dict[str, dict[str, list[float]]] = {}
    for block_size in block_sizes:
        by_block[str(block_size)] = {
            name: [
                float(v) for v in derive_codebook(block_size, metric, signed, n_samples=n_samples, seed=seed)
            ]
            for name, (metric, signed) in BOF4_VARIANTS.items()
        }
    return {
        "method": "empirical",
        "call": f"derive_codebook(block_size, metric, signed, method='empirical', n_samples={n_samples}, seed={seed})",
        "n_samples": n_samples,
        "seed": seed,
        "by_block_size": by_block,
    }
