"""NerVE settings, with where each comes from.

Jha & Reagen, "NerVE: Nonlinear Eigenspectrum Dynamics in LLM Feed-Forward Networks", ICLR 2026,
arXiv:2603.06922.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class NerVEConfig:
    """Defaults of `analyze` / `NerVECallback` and the ``analyze`` / ``track`` verbs.

    center:       centre the covariance, Σ = (X−μ)ᵀ(X−μ)/(N−1) (the paper's §3 definition); False gives the
                  uncentred second moment, which some users prefer for PR.
    dtype:        accumulation dtype; the paper uses float32 (36 MB per covariance at D = 3072).
    eps:          eigenvalue clamp and constant inside the logs (1e-12).
    sample_ratio: fraction of token rows kept (the same rows for PreAct and PostAct).
    log_steps:    tracking interval; the paper logs every 200 steps at GPT-2 125M scale (§4, ≈1 % overhead
                  at 1000 steps).
    gated_pre:    PreAct of a gated FFN: "gate" = W_gate·x (the official code), "up", "product_input".
    tokens:       tokens analysed post hoc (≥ 4·D keeps PR/SE from being capped by N).
    seq_len:      tokens per row of the analysed text.
    """

    center: bool = True
    dtype: str = "float32"
    eps: float = 1e-12
    sample_ratio: float = 1.0
    log_steps: int = 200
    gated_pre: str = "gate"
    tokens: int = 8192
    seq_len: int = 128

    def to_dict(self) -> dict:
        return asdict(self)
