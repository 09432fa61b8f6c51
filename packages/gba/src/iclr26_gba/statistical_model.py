"""The paper's statistical model of superposition: sparse non-negative codes over near-orthogonal features.

    x = Σ_i h_i v_i + σ·ξ,      V = [v_1 … v_n] ∈ R^{n×d},  ‖v_i‖ = 1,  ξ ~ N(0, I_d)

Rows of V are i.i.d. Gaussian directions normalised to unit length (near-orthogonal for large d).
The code h ∈ R^n_{≥0} has exactly s non-zero entries per row, placed uniformly at random, so every feature
occurs with frequency f_i = P(h_i > 0) = E[s]/n. ``sparsity`` may be a mixture {s: probability}: each row
draws its own s. Superposition means n > d; it is "heavy" when d < √n.
"""

from __future__ import annotations

import math

import torch

from .errors import GBAError
from .seeding import generator

MAGNITUDES = ("uniform", "halfnormal")


class SparseFeatureModel:
    """A seeded stream of (x [num, d], h [num, n]) from the sparse superposition model.

    Args:
        n_features: n, the number of true features.
        d: the ambient dimension.
        sparsity: s (an int), or a mixture {s: probability} over per-row sparsities.
        magnitude: "uniform" → h_i ~ U[0.5, 1.5]; "halfnormal" → |N(0, 1)| (the paper's law is not stated).
        noise: σ of the isotropic Gaussian noise added to x (per coordinate).
        seed: seeds V and the sample stream.

    Attributes:
        features: V, [n, d], unit rows.  frequencies: f, [n], f_i = E[s]/n.
    """

    def __init__(
        self,
        n_features: int,
        d: int,
        sparsity: int | dict[int, float],
        magnitude: str = "uniform",
        noise: float = 0.0,
        seed: int = 0,
    ) -> None:
        n_features, d = int(n_features), int(d)
        if n_features < 1 or d < 1:
            raise GBAError(f"n_features and d must be >= 1, got n_features={n_features}, d={d}")
        mix = {int(sparsity): 1.0} if isinstance(sparsity, int | float) else dict(sparsity)
        if not mix:
            raise GBAError("sparsity mixture is empty")
        for s, prob in mix.items():
            if int(s) != s or s < 1:
                raise GBAError(f"sparsity must be a positive integer, got {s}")
            if s > n_features:
                raise GBAError(f"sparsity {s} is larger than n_features={n_features}")
            if not prob >= 0:
                raise GBAError(f"sparsity probability for s={s} must be >= 0, got {prob}")
        total = sum(mix.values())
        if not math.isclose(total, 1.0, rel_tol=1e-6, abs_tol=1e-9):
            raise GBAError(f"sparsity probabilities must sum to 1, got {total:g}")
        if magnitude not in MAGNITUDES:
            raise GBAError(f"unknown magnitude law {magnitude!r}; choose one of {', '.join(MAGNITUDES)}")
        if not noise >= 0:
            raise GBAError(f"noise must be >= 0, got {noise}")
        self.n_features, self.d, self.magnitude, self.noise, self.seed = (
            n_features,
            d,
            magnitude,
            float(noise),
            seed,
        )
        self.sparsity = {int(s): float(p) for s, p in sorted(mix.items())}
        v = torch.randn(n_features, d, generator=generator(int(seed), "features"))
        self.features = v / v.norm(dim=1, keepdim=True)
        mean_s = sum(s * p for s, p in self.sparsity.items())
        self.frequencies = torch.full((n_features,), mean_s / n_features)
        self._s_values = torch.tensor(list(self.sparsity), dtype=torch.long)
        self._s_probs = torch.tensor(list(self.sparsity.values()), dtype=torch.float64)
        self._stream = generator(int(seed), "stream")

    def __repr__(self) -> str:
        return (
            f"SparseFeatureModel(n_features={self.n_features}, d={self.d}, sparsity={self.sparsity}, "
            f"magnitude={self.magnitude!r}, noise={self.noise}, seed={self.seed})"
        )

    def sample_codes(self, num: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """h [num, n]: exactly s_r non-zeros in row r, at uniformly random positions, magnitudes > 0."""
        g = self._stream if generator is None else generator
        n = self.n_features
        if len(self._s_values) == 1:
            s = self._s_values.expand(num)
        else:
            s = self._s_values[torch.multinomial(self._s_probs, num, replacement=True, generator=g)]
        # position j of row r is active iff its uniform key is among the s_r smallest of the row
        keys = torch.rand(num, n, generator=g)
        s_max = int(self._s_values.max())
        kth = keys.topk(s_max, dim=1, largest=False, sorted=True).values.gather(1, (s - 1).unsqueeze(1))
        mask = keys <= kth
        if self.magnitude == "uniform":
            mag = 0.5 + torch.rand(num, n, generator=g)
        else:
            mag = torch.randn(num, n, generator=g).abs().clamp_min(1e-12)
        return mag * mask

    def sample(self, num: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(x [num, d], h [num, n]) with x = h V + σ ξ. Without ``generator`` the model's own stream is used."""
        g = self._stream if generator is None else generator
        h = self.sample_codes(int(num), g)
        x = h @ self.features
        if self.noise > 0:
            x = x + self.noise * torch.randn(x.shape, generator=g)
        return x, h


def parse_sparsity(text: str) -> int | dict[int, float]:
    """``"4"`` → 4; ``"2:0.5,8:0.5"`` → {2: 0.5, 8: 0.5} (the CLI's ``--sparsity``)."""
    text = text.strip()
    try:
        if ":" not in text:
            return int(text)
        out: dict[int, float] = {}
        for part in text.split(","):
            s, _, p = part.partition(":")
            out[int(s)] = float(p)
        return out
    except ValueError:
        raise GBAError(
            f"cannot read sparsity {text!r}; write an int (4) or a mixture (2:0.5,8:0.5)"
        ) from None
