"""Peers side by side on the same model and texts: transformers' own ``QuantizedCache`` (quanto backend).

``transformers.QuantizedCache(backend="quanto", nbits=2|4, q_group_size=head_dim, residual_length=window)`` is
KIVI-inspired like our `FixedBitsCache`: a full-precision residual of ``window`` tokens, the rest quantised
once at ``nbits`` in groups along the channels of each token and head (our grouping). It stores scale and
shift in the model's dtype (float32 here) where we store float16, and has no attention sink.

quanto's CPU unpack kernel is a C++ extension compiled on first use (minutes, into site-packages); we hand
quanto a pure-PyTorch unpack of the same layout instead (`_python_unpack`).

kvpress (token-eviction "presses") is not run: kvpress 0.5.5 requires transformers < 5.3 and this workspace
is locked on a later transformers 5 (see the README).
"""

from __future__ import annotations

from typing import Any

import torch

PEERS = ("optimum-quanto",)
NOT_LOCKABLE = {"kvpress": "kvpress requires transformers<5.3"}


def _python_unpack() -> None:
    """Give quanto's CPU extension its Python unpack so that nothing is compiled at run time."""
    from types import SimpleNamespace

    from optimum.quanto.library.extensions import get_extension

    def unpack(packed: torch.Tensor, bits: int) -> torch.Tensor:
        # quanto's layout: value i of every uint8 word sits at bits*i; the values are stacked along dim 0
        mask = (1 << bits) - 1
        return torch.cat([(packed >> (bits * i)) & mask for i in range(8 // bits)]).to(torch.uint8)

    ext = get_extension("quanto_cpp")
    if ext._lib is None:
        ext._lib = SimpleNamespace(unpack=unpack)


def quanto_available() -> tuple[bool, str]:
    try:
        import optimum.quanto  # noqa: F401

        _python_unpack()
    except Exception as exc:  # ImportError, a broken build ...
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return True, ""


def quanto_cache(model: Any, nbits: int, window: int, group_size: int):
    import transformers

    _python_unpack()
    return transformers.QuantizedCache(
        backend="quanto", config=model.config, nbits=nbits, q_group_size=group_size, residual_length=window
    )


def quanto_bytes(cache: Any) -> list[int]:
    """Bytes of each layer's quantised part: packed codes + scales + shifts (as quanto stores them)."""
    out = []
    for layer in cache.layers:
        total = 0
        for q in (getattr(layer, "_quantized_keys", None), getattr(layer, "_quantized_values", None)):
            if q is None:
                continue
            data = q._data._data if hasattr(q._data, "_data") else q._data
            for t in (data, q._scale, q._shift):
                if isinstance(t, torch.Tensor):
                    total += t.numel() * t.element_size()
        out.append(total)
    return out
