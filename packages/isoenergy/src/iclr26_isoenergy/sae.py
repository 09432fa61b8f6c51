"""The Matching-Pursuit sparse autoencoder (the paper's base SAE, as in `overcomplete`'s ``MpSAE``).

Encoding, k greedy steps on the residual (x: [B, D], Dict: [K, D], atoms as rows):

    r ← x;  z ← 0
    repeat k times:  s = r·Dictᵀ  ([B, K]);  j = argmax_j s_j;  z_j += s_j;  r ← r − s_j·Dict_j
    x̂ = z·Dict      (no bias)

With ``normalize_atoms=True`` the atoms are Dict_j/‖Dict_j‖ inside the forward pass (differentiable), so the
pursuit is standard MP; ``False`` (default) keeps free atom norms (the official "identity" normalisation). Gradients flow
through every pursuit step; per step only [B, D] tensors and the selected indices are kept for backward
(no [K, D]-sized tensor per step), so memory grows with k·B·D, not k·K·D.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .validate import IsoEnergyError

FORMAT = "iclr26-isoenergy-mp-sae"


class MatchingPursuitSAE(nn.Module):
    """MP-SAE with ``n_atoms`` (default 8·d) atoms of dimension ``d`` and ``k`` pursuit steps.

    ``forward(x) -> (x_hat, z)``; ``encode(x) -> z`` ([B, K], at most k non-zeros per row);
    ``decode(z) -> x_hat``. Dictionary rows start at unit norm (seeded by ``seed``).
    """

    def __init__(
        self,
        d: int,
        n_atoms: int | None = None,
        k: int = 20,
        normalize_atoms: bool = False,
        seed: int | None = 0,
    ) -> None:
        super().__init__()
        d = int(d)
        n_atoms = 8 * d if n_atoms is None else int(n_atoms)
        k = int(k)
        if d < 1 or n_atoms < 1:
            raise IsoEnergyError(f"d and n_atoms must be >= 1, got d={d}, n_atoms={n_atoms}")
        if k < 1:
            raise IsoEnergyError(f"k (pursuit steps) must be >= 1, got {k}")
        if k > n_atoms:
            raise IsoEnergyError(f"k={k} > n_atoms={n_atoms}: the pursuit cannot take more steps than atoms")
        self.d, self.n_atoms, self.k = d, n_atoms, k
        self.normalize_atoms = bool(normalize_atoms)
        g = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        w = torch.randn(n_atoms, d, generator=g)
        self.dictionary = nn.Parameter(w / w.norm(dim=1, keepdim=True))

    def extra_repr(self) -> str:
        return f"d={self.d}, n_atoms={self.n_atoms}, k={self.k}, normalize_atoms={self.normalize_atoms}"

    def atoms(self) -> torch.Tensor:
        """The dictionary as used by the pursuit: [K, D], unit rows when ``normalize_atoms``."""
        w = self.dictionary
        if self.normalize_atoms:
            w = w / w.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return w

    def _check(self, x: torch.Tensor) -> None:
        if x.ndim != 2 or x.shape[1] != self.d:
            raise IsoEnergyError(f"the SAE takes [N, {self.d}] embeddings, got shape {tuple(x.shape)}")

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Codes z ∈ R^{B×K} by k matching-pursuit steps (module docstring)."""
        self._check(x)
        w = self.atoms()
        r = x
        values, indices = [], []
        for _ in range(self.k):
            s = r @ w.T  # [B, K]
            val, idx = s.max(dim=1)  # [B], [B]
            r = r - val.unsqueeze(1) * w[idx]  # [B, D]
            values.append(val)
            indices.append(idx)
        z = torch.zeros(x.shape[0], self.n_atoms, dtype=x.dtype, device=x.device)
        return z.scatter_add(1, torch.stack(indices, 1), torch.stack(values, 1))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """x̂ = z·Dict (no bias). z: [B, K] -> [B, D]."""
        if z.ndim != 2 or z.shape[1] != self.n_atoms:
            raise IsoEnergyError(f"codes must have shape [N, {self.n_atoms}], got {tuple(z.shape)}")
        return z @ self.atoms()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encode(x)
        return self.decode(z), z

    # ------------------------------------------------------------------------------------------- files
    def config(self) -> dict:
        return {"d": self.d, "n_atoms": self.n_atoms, "k": self.k, "normalize_atoms": self.normalize_atoms}

    def save(self, path: str | Path, metadata: dict | None = None) -> Path:
        """Write the dictionary and its settings to one safetensors file, atomically (temp file + rename)."""
        import json
        import os

        from safetensors.torch import save_file

        path = Path(path)
        meta = {"format": FORMAT, "config": json.dumps(self.config()), **(metadata or {})}
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            save_file({"dictionary": self.dictionary.detach().contiguous().cpu()}, str(tmp), metadata=meta)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    @classmethod
    def load(cls, path: str | Path) -> MatchingPursuitSAE:
        """Read a file written by `save` (no pickle); a missing or corrupt file is one `IsoEnergyError`."""
        import json

        from safetensors import SafetensorError, safe_open

        path = Path(path)
        if not path.is_file():
            raise IsoEnergyError(f"no SAE file at {str(path)!r}")
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                w = f.get_tensor("dictionary")
        except (SafetensorError, OSError, KeyError) as exc:
            raise IsoEnergyError(f"cannot read SAE file {str(path)!r} ({exc})") from None
        if meta.get("format") != FORMAT:
            raise IsoEnergyError(f"{str(path)!r} is not an iclr26-isoenergy SAE file")
        cfg = json.loads(meta["config"])
        sae = cls(cfg["d"], cfg["n_atoms"], cfg["k"], cfg["normalize_atoms"], seed=None)
        if tuple(w.shape) != (sae.n_atoms, sae.d):
            raise IsoEnergyError(f"SAE file {str(path)!r} is corrupt: dictionary shape {tuple(w.shape)}")
        with torch.no_grad():
            sae.dictionary.copy_(w)
        return sae.eval()
