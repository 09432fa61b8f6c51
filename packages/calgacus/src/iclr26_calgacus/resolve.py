"""`resolve_model`: a Calgacus `RankLM` from whatever the user passes (it sits above every adapter:
``hf.py``, ``tiny.py`` and ``llamacpp.py`` import nothing from here, so the package has no import cycle)."""

from __future__ import annotations

from typing import Any

from .hf import HFRankLM
from .ranks import CalgacusError, RankLM


def resolve_model(model: Any, tokenizer: Any = None) -> RankLM:
    """A `RankLM` from a `RankLM`, a `transformers` model (+ tokenizer), ``"tiny"``, a ``.gguf`` file
    (llama-cpp-python) or a path/hub id."""
    if isinstance(model, str):
        if model == "tiny" or model.startswith("tiny:"):
            from .tiny import load_tiny

            return load_tiny(model.partition(":")[2] or "default")
        if model.endswith(".gguf"):
            from .llamacpp import LlamaCppRankLM

            return LlamaCppRankLM(model)
        from iclr26_core.models import load_causal_lm, load_tokenizer

        tok = tokenizer if tokenizer is not None else load_tokenizer(model)
        return HFRankLM(load_causal_lm(model), tok, name=model)
    if hasattr(model, "session") and hasattr(model, "admissible_mask"):
        return model
    if hasattr(model, "config") and hasattr(model, "forward"):
        return HFRankLM(model, tokenizer)
    raise CalgacusError(
        f"cannot use a {type(model).__name__} as a language model "
        "(give a transformers model + tokenizer, a path/hub id, 'tiny' or a RankLM)"
    )
