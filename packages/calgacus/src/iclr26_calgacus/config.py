"""Settings of the Calgacus protocol.

Paper: Antonio Norelli, Michael Bronstein, "LLMs can hide text in other text of the same length"
(Calgacus), ICLR 2026, arXiv:2510.20075 — https://arxiv.org/abs/2510.20075.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CalgacusConfig:
    """The shared secret besides the model (Method section of the paper / spec).

    key:           the public-looking key prompt k; it sets topic, tone and style of the cover text.
    secret_prefix: the secret prefix k' placed before the secret when ranking it (paper default "A text:").
    admissible:    "all" (every non-special token) or "canonical" (cover candidates that keep the cover's
                   tokenisation canonical, so BPE text transport round-trips exactly).
    trailer:       optional fixed text appended to the secret so the cover ends naturally (off by default).
    whitespace:    "exact" (default) or "lf": the receiver reads CR LF / CR as LF and the cover avoids CR.
    """

    key: str = ""
    secret_prefix: str = "A text:"
    admissible: str = "all"
    trailer: str | None = None
    whitespace: str = "exact"

    def kwargs(self) -> dict:
        return {
            "secret_prefix": self.secret_prefix,
            "admissible": self.admissible,
            "whitespace": self.whitespace,
        }
