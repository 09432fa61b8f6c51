"""iclr26-calgacus: hide a text inside another text of the same token length (Calgacus, ICLR 2026).

Public API (imported lazily, so ``import iclr26_calgacus`` does not import torch):

    encode, decode, Stegotext, plausibility      the protocol          (protocol.py)
    token_ranks, tokens_from_ranks, RankLM       the two primitives    (ranks.py)
    HFRankLM                                     transformers adapter  (hf.py)
    CharNGramLM                                  Kneser–Ney n-gram LM  (ngram.py)
    load_tiny                                    the tiny offline model (tiny.py)
    CalgacusConfig, CalgacusError
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("iclr26-calgacus")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0"

_EXPORTS = {
    "encode": "protocol",
    "decode": "protocol",
    "Stegotext": "protocol",
    "plausibility": "protocol",
    "random_rank_text": "protocol",
    "token_ranks": "ranks",
    "tokens_from_ranks": "ranks",
    "RankLM": "ranks",
    "rank_of": "ranks",
    "token_at_rank": "ranks",
    "CalgacusError": "ranks",
    "HFRankLM": "hf",
    "resolve_model": "hf",
    "CharNGramLM": "ngram",
    "load_tiny": "tiny",
    "CalgacusConfig": "config",
}
__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
