"""Settings of the method, with the paper's defaults.

Paper: "Cross-Modal Redundancy and the Geometry of Vision–Language Embeddings", Dhimoïla, Fel, Boutin,
Picard, ICLR 2026, https://arxiv.org/abs/2602.06218 (official code: Parabrele/IsoEnergy, built on
`overcomplete`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

KEEP = ("bimodal", "unimodal", "image", "text", "all")

# β per model in the official demo (its loss: MSE averaged over elements); ours sums over the D elements of a
# row, so the CLI uses β·D. A model outside the table gets the demo's default model's β (CLIP B/32, 4e-4).
OFFICIAL_BETA = {
    "openai/clip-vit-base-patch32": 4e-4,
    "openai/clip-vit-large-patch14": 1e-4,
    "laion/CLIP-ViT-B-32-laion2B-s34B-b79K": 4e-4,
    "laion/CLIP-ViT-L-14-laion2B-s32B-b82K": 2e-4,
    "google/siglip-base-patch16-224": 1e-4,
    "google/siglip2-base-patch16-224": 7e-5,
}
DEFAULT_OFFICIAL_BETA = 4e-4


def default_beta(d: int, model: str | None = None) -> float:
    """The CLI's default β in our loss normalisation: the official per-model β (or 4e-4) times D."""
    key = (model or "").rstrip("/")
    official = next((b for name, b in OFFICIAL_BETA.items() if key == name or key.endswith("/" + name)), None)
    return (DEFAULT_OFFICIAL_BETA if official is None else official) * int(d)


ALIGN = ("cosine", "energy")


@dataclass
class SAEConfig:
    """The Matching-Pursuit SAE (Sec. 3): codes z = ψ(x) ∈ R^K by k greedy pursuit steps, x̂ = z·Dict (no bias).

    n_atoms: K; ``None`` = 8·D (4096 for 512-d CLIP, the paper's expansion).
    k: pursuit steps (ℓ0 ≤ k); the paper's 20.
    normalize_atoms: unit-norm atoms inside the forward pass (standard MP); False (default) = the official
    "identity" dictionary normalisation, free atom norms (``normalisation='identity'`` in the official code).
    """

    n_atoms: int | None = None
    k: int = 20
    normalize_atoms: bool = False

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
