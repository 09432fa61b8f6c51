"""Settings of the method, with the paper's defaults.

Paper: "Cross-Modal Redundancy and the Geometry of Vision–Language Embeddings", Dhimoïla, Fel, Boutin,
Picard, ICLR 2026, https://arxiv.org/abs/2602.06218 (official code: Parabrele/IsoEnergy, built on
`overcomplete`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

KEEP = ("bimodal", "unimodal", "image", "text", "all")
ALIGN = ("cosine", "energy")


@dataclass
class SAEConfig:
    """The Matching-Pursuit SAE (Sec. 3): codes z = ψ(x) ∈ R^K by k greedy pursuit steps, x̂ = z·Dict (no bias).

    n_atoms: K; ``None`` = 8·D (4096 for 512-d CLIP, the paper's expansion).
    k: pursuit steps (ℓ0 ≤ k); the paper's 20.
    normalize_atoms: unit-norm atoms inside the forward pass (standard MP); False = the official "identity"
    dictionary normalisation, free atom norms.
    """

    n_atoms: int | None = None
    k: int = 20
    normalize_atoms: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainConfig:
    """Training of SAE / SAE-A (Eq. 1): L = L_SAE + β·L_align.

    beta: β; 0 is the standard SAE. The paper's β ≈ 1e-4 belongs to the official mean-over-elements MSE;
    under our per-row sum it is ≈ 1e-4·D (inferred; see the README).
    align: "cosine" (Eq. 1, top-1 masked cosine between the codes of a pair) or "energy" (the official code's
    explicit Iso-Energy loss).
    Adam with OneCycle (max lr), 5 epochs, batch 512 pairs, grad-clip 1.0: the official demo's recipe.
    shuffle_pairs: fraction of training pairs whose text is swapped with another pair's (robustness option).
    """

    beta: float = 0.0
    epochs: int = 5
    batch_pairs: int = 512
    lr: float = 5e-4
    align: str = "cosine"
    mask_top1: bool = True
    grad_clip: float = 1.0
    shuffle_pairs: float = 0.0
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)
