"""iclr26-calgacus: hide a text inside another text of the same token length (Calgacus, ICLR 2026).

Public API (imported lazily, so ``import iclr26_calgacus`` does not import torch):

    encode, decode, Stegotext, plausibility      the protocol          (protocol.py)
    token_ranks, tokens_from_ranks, RankLM       the two primitives    (ranks.py)
    CoverFilter                                  canonical / whitespace filter (canonical.py)
    HFRankLM                                     transformers adapter  (hf.py)
    resolve_model                                a RankLM from a model, path, "tiny" or .gguf (resolve.py)
    LlamaCppRankLM                               GGUF via llama-cpp-python (llamacpp.py, optional peer)
    CharNGramLM                                  Kneser–Ney n-gram LM  (ngram.py)
    ac_encode, ac_decode                         arithmetic-coding baseline (arithmetic.py)
    load_tiny                                    the tiny offline model (tiny.py)
    CalgacusConfig, CalgacusError, CalgacusWarning
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-calgacus",
    {
        "protocol": "encode decode Stegotext plausibility random_rank_text CalgacusWarning prompt_check",
        "canonical": "CoverFilter",
        "llamacpp": "LlamaCppRankLM",
        "arithmetic": "ac_encode ac_decode ArithmeticStegotext",
        "ranks": "token_ranks tokens_from_ranks RankLM rank_of token_at_rank CalgacusError",
        "hf": "HFRankLM",
        "resolve": "resolve_model",
        "ngram": "CharNGramLM",
        "tiny": "load_tiny",
        "config": "CalgacusConfig",
    },
)
