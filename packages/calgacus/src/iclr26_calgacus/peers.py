"""Peers compared side by side (spec, Peers), probed at run time: a missing one is a row saying so.

* ``innocuous`` — LLM steganography on llama.cpp generations (hides bytes, variable length); benched only
  when a GGUF model path is given (``CALGACUS_GGUF``), which the miniature runs never have.
* ``llama-cpp-python`` — the official notebook's backend (GGUF models).
Calgacus maps text to text of equal token length and is not distribution-preserving; the peers hide
bytes in variable-length, (near-)distribution-preserving covers.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any


def _probe(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def peer_rows(ctx: Any, lm: Any, cases: list, prefix: str) -> list[dict[str, Any]]:
    """One row per peer: name, status and (when it ran) its numbers."""
    gguf = os.environ.get("CALGACUS_GGUF")
    rows = []
    for name, module in (("innocuous", "innocuous"), ("llama-cpp-python", "llama_cpp")):
        if not _probe(module):
            status = f"not installed (pip install 'iclr26-calgacus[peers]'); module {module!r} missing"
            ctx.peers_missing([name])
        elif not gguf:
            status = "installed, but no GGUF model given (set CALGACUS_GGUF=/path/model.gguf); not run"
        else:
            status = "installed; GGUF benchmarking is not implemented in this version"
        rows.append({"peer": name, "status": status})
    return rows
