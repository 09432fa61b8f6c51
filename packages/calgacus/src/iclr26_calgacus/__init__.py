"""iclr26-calgacus: hide a text inside another text of the same token length (Calgacus, ICLR 2026).

Public API (imported lazily, so ``import iclr26_calgacus`` does not import torch):

    encode, decode, Stegotext, plausibility      the protocol          (protocol.py)
    token_ranks, tokens_from_ranks, RankLM       the two primitives    (ranks.py)
    CoverFilter                                  canonical / whitespace filter (canonical.py)
    HFRankLM                                     transformers adapter  (hf.py)
    LlamaCppRankLM                               GGUF via llama-cpp-python (llamacpp.py, optional peer)
    CharNGramLM                                  Kneser–Ney n-gram LM  (ngram.py)
    ac_encode, ac_decode                         arithmetic-coding baseline (arithmetic.py)
    load_tiny                                    the tiny offline model (tiny.py)
    CalgacusConfig, CalgacusError, CalgacusWarning
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-calgacus")

_EXPORTS = {
    "encode": "protocol",
    "decode": "protocol",
    "Stegotext": "protocol",
    "plausibility": "protocol",
    "random_rank_text": "protocol",
    "CalgacusWarning": "protocol",
    "prompt_check": "protocol",
    "CoverFilter": "canonical",
    "LlamaCppRankLM": "llamacpp",
    "ac_encode": "arithmetic",
    "ac_decode": "arithmetic",
    "ArithmeticStegotext": "arithmetic",
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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
