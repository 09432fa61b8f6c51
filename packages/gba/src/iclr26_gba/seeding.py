"""Independent random streams from one integer seed.

``derive_seed(seed, tag)`` hashes (seed, tag) to a 63-bit seed, so that e.g. the true dictionary of a toy
(tag "features") and an SAE's initial weights (tag "sae-init") never coincide when both use seed 0 —
with plain ``manual_seed(0)`` both would draw the same Gaussian rows and the SAE would start at the answer.
"""

from __future__ import annotations

import hashlib

import torch


def derive_seed(seed: int, tag: str) -> int:
    """A 63-bit seed for the stream named ``tag`` of ``seed``."""
    digest = hashlib.sha256(f"iclr26-gba:{int(seed)}:{tag}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def generator(seed: int, tag: str) -> torch.Generator:
    """A CPU ``torch.Generator`` for the stream ``tag`` of ``seed``."""
    return torch.Generator().manual_seed(derive_seed(seed, tag))
