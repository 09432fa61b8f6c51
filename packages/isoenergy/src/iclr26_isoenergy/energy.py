"""The energy report: which atoms are bimodal, image-unimodal or text-unimodal, and interventions on them.

For codes z of the image rows and of the text rows (squared codes, as the official demo; its default argument
used z, which is not copied):

    E_I,k = mean over images of z_k²,   E_T,k = mean over texts of z_k²
    dead  ⇔ E_I,k + E_T,k < 1e-9
    µ_k   = E_I,k / (E_I,k + E_T,k)      text-unimodal if µ < ε, image-unimodal if µ > 1 − ε, else bimodal

`restrict` encodes, keeps the codes of one group of atoms and decodes. The decoder is linear with no bias, so
restrict(bimodal) + restrict(unimodal) = restrict(all) on the data the report was computed on (there dead
atoms never fire).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .config import KEEP
from .validate import IsoEnergyError, check_embeddings, check_pairs

LABEL_NAMES = ("dead", "bimodal", "image", "text")
DEAD, BIMODAL, IMAGE, TEXT = range(4)


@dataclass
class EnergyReport:
    """Per-atom energies, modality scores and labels (``LABEL_NAMES``), and the energy fractions."""

    e_img: torch.Tensor  # [K]
    e_txt: torch.Tensor  # [K]
    mu: torch.Tensor  # [K], NaN for dead atoms
    labels: torch.Tensor  # [K] int: 0 dead, 1 bimodal, 2 image, 3 text
    eps: float

    @property
    def counts(self) -> dict[str, int]:
        return {name: int((self.labels == i).sum()) for i, name in enumerate(LABEL_NAMES)}

    @property
    def fractions(self) -> dict[str, float]:
        """Share of the total energy (E_I + E_T) carried by bimodal, image and text atoms."""
        e = (self.e_img + self.e_txt).double()
        total = float(e.sum()) or 1.0
        return {name: float(e[self.labels == i].sum()) / total for i, name in enumerate(LABEL_NAMES) if i}

    def mask(self, keep: str) -> torch.Tensor:
        """Boolean [K] mask of the atoms in ``keep`` ∈ {bimodal, unimodal, image, text, all}."""
        if keep not in KEEP:
            raise IsoEnergyError(f"unknown keep {keep!r}; choose one of {', '.join(KEEP)}")
        if keep == "all":
            return torch.ones_like(self.labels, dtype=torch.bool)
        if keep == "unimodal":
            return (self.labels == IMAGE) | (self.labels == TEXT)
        return self.labels == LABEL_NAMES.index(keep)

    def to_json(self) -> dict[str, Any]:
        return {
            "eps": self.eps,
            "counts": self.counts,
            "energy_fractions": self.fractions,
            "e_img": self.e_img.tolist(),
            "e_txt": self.e_txt.tolist(),
            "mu": [None if m != m else float(m) for m in self.mu.tolist()],
            "labels": [LABEL_NAMES[i] for i in self.labels.tolist()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EnergyReport:
        try:
            labels = torch.tensor([LABEL_NAMES.index(x) for x in data["labels"]])
            mu = torch.tensor([float("nan") if m is None else m for m in data["mu"]])
            return cls(torch.tensor(data["e_img"]), torch.tensor(data["e_txt"]), mu, labels, data["eps"])
        except (KeyError, ValueError, TypeError) as exc:
            raise IsoEnergyError(f"not an energy report ({exc})") from None

    def plot(self, path: str | Path, title: str = "") -> str:
        """Energy-weighted histogram of µ over live atoms, with the ε bands; PNG at ``path``."""
        from .plots import mu_histogram

        return mu_histogram({title or "SAE": self}, path)


def energies_from_codes(z_img: torch.Tensor, z_txt: torch.Tensor, eps: float = 0.05) -> EnergyReport:
    """The report from codes: z_img [N_I, K], z_txt [N_T, K] (module docstring)."""
    if not 0.0 < eps < 0.5:
        raise IsoEnergyError(f"eps must be in (0, 0.5), got {eps}")
    e_img = (z_img.double() ** 2).mean(dim=0)
    e_txt = (z_txt.double() ** 2).mean(dim=0)
    total = e_img + e_txt
    dead = total < 1e-9
    mu = torch.where(dead, torch.full_like(total, float("nan")), e_img / total.clamp_min(1e-300))
    labels = torch.full(mu.shape, BIMODAL, dtype=torch.long)
    labels[mu < eps] = TEXT
    labels[mu > 1 - eps] = IMAGE
    labels[dead] = DEAD
    return EnergyReport(e_img.float(), e_txt.float(), mu.float(), labels, float(eps))


@torch.no_grad()
def encode_batched(sae, x: torch.Tensor, batch: int = 4096) -> torch.Tensor:
    """``sae.encode`` over row chunks (no autograd)."""
    return torch.cat([sae.encode(x[i : i + batch]) for i in range(0, x.shape[0], batch)])


def energy_report(sae, img: torch.Tensor, txt: torch.Tensor, eps: float = 0.05) -> EnergyReport:
    """Encode both modalities with ``sae`` and label every atom (module docstring)."""
    img, txt = check_pairs(img, txt)
    return energies_from_codes(encode_batched(sae, img), encode_batched(sae, txt), eps)


@torch.no_grad()
def restrict(sae, emb: torch.Tensor, report: EnergyReport, keep: str = "bimodal") -> torch.Tensor:
    """Decode ``emb`` [N, D] from the codes of the atoms in ``keep`` only (bimodal / unimodal / image / text /
    all). -> [N, D]."""
    mask = report.mask(keep)
    emb = check_embeddings(emb)
    if mask.shape[0] != sae.n_atoms:
        raise IsoEnergyError(f"the energy report has {mask.shape[0]} atoms but the SAE has {sae.n_atoms}")
    z = encode_batched(sae, emb)
    return sae.decode(z * mask.to(z.dtype))
