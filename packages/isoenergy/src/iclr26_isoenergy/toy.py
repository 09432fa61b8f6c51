"""`IsoEnergyToy`: paired "image" and "text" embeddings with known shared and modality-specific atoms.

World (fixed by ``seed``): in R^d, random unit directions for ``n_shared`` shared concepts S_c, ``n_image``
image-only and ``n_text`` text-only atoms, an image-bias and a text-bias direction; N_c ⟂ S_c (unit). The text
version of concept c is T_c = cos θ·S_c + sin θ·N_c (θ = ``rotation_deg``).

A pair: ``active_shared`` distinct concepts with coefficients a ~ U[0.5, 1.5] (the same for both modalities),
one image-only atom and one text-only atom (coefficients U[0.5, 1.5]):

    x_I = Σ a_c S_c + u_I + bias·b_I + noise·ε_I
    x_T = α·Σ a_c T_c + u_T + bias·b_T + noise·ε_T          (α = ``text_amplitude``)

then both are L2-normalised. α = 1: a shared concept carries the same energy in both modalities (Iso-Energy
holds); α = 0.1: it is violated. ``concept_freq="zipf"`` draws concepts with probability ∝ 1/rank instead of
uniformly (unequal frequencies).

The modality-gap world (``view_offset_deg`` φ > 0, exclusive with θ): each view of concept c is the concept
turned by φ towards its own modality-specific offset,

    image view I_c = cos φ·S_c + sin φ·U_c,   text view T_c = cos φ·S_c + sin φ·V_c,   U_c, V_c, S_c orthonormal

and x_I = Σ a_c I_c + ..., x_T = α·Σ a_c T_c + ...; the truth of concept c is S_c, which neither view
contains alone: cos(I_c, S_c) = cos(T_c, S_c) = cos φ and cos(I_c, T_c) = cos²φ by construction. With
``gap_rank`` r > 0 the offsets U_c (V_c) lie in one r-dimensional image (text) subspace, orthogonal to the
concepts' subspace (a low-rank modality gap); r = 0 draws them per concept in general position.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .validate import IsoEnergyError


class IsoEnergyToy:
    """The synthetic paired world (module docstring). ``.atoms``: the ground-truth directions (unit rows)."""

    def __init__(
        self,
        d: int = 64,
        n_shared: int = 48,
        n_image: int = 8,
        n_text: int = 8,
        active_shared: int = 3,
        rotation_deg: float = 0.0,
        text_amplitude: float = 1.0,
        bias: float = 1.0,
        noise: float = 0.05,
        seed: int = 123,
        concept_freq: str = "uniform",
        view_offset_deg: float = 0.0,
        gap_rank: int = 0,
    ) -> None:
        if not 1 <= active_shared <= n_shared:
            raise IsoEnergyError(f"active_shared must be in [1, n_shared={n_shared}], got {active_shared}")
        if n_image < 1 or n_text < 1 or d < 2:
            raise IsoEnergyError("the toy needs d >= 2 and at least one image-only and one text-only atom")
        if not 0.0 <= float(view_offset_deg) <= 90.0:
            raise IsoEnergyError(f"view_offset_deg must be in [0, 90], got {view_offset_deg}")
        if float(view_offset_deg) > 0 and float(rotation_deg) % 360 != 0:
            raise IsoEnergyError("choose one of rotation_deg (θ) and view_offset_deg (φ), not both")
        if concept_freq not in ("uniform", "zipf"):
            raise IsoEnergyError(f"concept_freq must be uniform or zipf, got {concept_freq!r}")
        self.d, self.n_shared, self.n_image, self.n_text = int(d), int(n_shared), int(n_image), int(n_text)
        self.active_shared = int(active_shared)
        self.rotation_deg, self.text_amplitude = float(rotation_deg), float(text_amplitude)
        self.bias, self.noise, self.seed = float(bias), float(noise), int(seed)
        self.concept_freq, self.view_offset_deg, self.gap_rank = (
            concept_freq,
            float(view_offset_deg),
            int(gap_rank),
        )
        if not 0 <= self.gap_rank <= (self.d - 1) // 2:
            raise IsoEnergyError(f"gap_rank must be in [0, (d-1)//2 = {(self.d - 1) // 2}], got {gap_rank}")
        g = torch.Generator().manual_seed(self.seed)

        def unit(n: int) -> torch.Tensor:
            return F.normalize(torch.randn(n, self.d, generator=g), dim=1)

        shared = unit(self.n_shared)
        perp = unit(self.n_shared)
        perp = F.normalize(perp - (perp * shared).sum(1, keepdim=True) * shared, dim=1)  # N_c ⟂ S_c
        theta, phi = math.radians(self.rotation_deg), math.radians(self.view_offset_deg)
        image, text, bias_image, bias_text = unit(self.n_image), unit(self.n_text), unit(1)[0], unit(1)[0]
        # φ > 0, the modality-gap world: an image offset U_c = N_c and a text offset V_c ⟂ {S_c, N_c} per concept
        # (drawn last, so that the θ world's atoms do not change)
        vtxt = unit(self.n_shared)
        for basis in (shared, perp):
            vtxt = F.normalize(vtxt - (vtxt * basis).sum(1, keepdim=True) * basis, dim=1)
        uimg = perp
        if phi > 0 and self.gap_rank > 0:  # offsets inside an r-dim image and an r-dim text subspace
            q, _ = torch.linalg.qr(torch.randn(self.d, self.d, generator=g))
            r = self.gap_rank
            bi, bt, rest = q[:, :r].T, q[:, r : 2 * r].T, q[:, 2 * r :].T
            shared = F.normalize(torch.randn(self.n_shared, rest.shape[0], generator=g) @ rest, dim=1)
            uimg = F.normalize(torch.randn(self.n_shared, r, generator=g) @ bi, dim=1)
            vtxt = F.normalize(torch.randn(self.n_shared, r, generator=g) @ bt, dim=1)
        self.atoms: dict[str, torch.Tensor] = {
            "shared": shared,
            "perp": perp,
            "image_shared": math.cos(phi) * shared + math.sin(phi) * uimg,
            "text_shared": (
                math.cos(phi) * shared + math.sin(phi) * vtxt
                if phi > 0
                else math.cos(theta) * shared + math.sin(theta) * perp
            ),
            "image": image,
            "text": text,
            "bias_image": bias_image,
            "bias_text": bias_text,
        }
        ranks = torch.arange(1, self.n_shared + 1, dtype=torch.float64)
        self.concept_probs = (1.0 / ranks if concept_freq == "zipf" else torch.ones_like(ranks)).float()
        self.concept_probs /= self.concept_probs.sum()

    def truth(self, kind: str = "full") -> torch.Tensor:
        """True atoms to compare a dictionary with: "shared" = {S_c}; "full" = {S_c, T_c (when θ ≠ 0),
        image-only, text-only, both biases}. In the φ world the views are not truth atoms: S_c is the concept."""
        a = self.atoms
        if kind == "shared":
            return a["shared"]
        parts = [a["shared"]]
        if self.rotation_deg % 360 != 0 and self.view_offset_deg == 0:
            parts.append(a["text_shared"])
        parts += [a["image"], a["text"], a["bias_image"][None], a["bias_text"][None]]
        return torch.cat(parts)

    def sample(self, n: int, seed: int = 0, return_codes: bool = False) -> Any:
        """(img, txt), each [n, d] and unit-norm; with ``return_codes`` also the true codes as a dict:
        raw_image / raw_text [n, n_shared] (shared-concept coefficients before the L2 normalisation),
        shared_image / shared_text (after it: coefficient / ‖x‖), image_only [n, n_image], text_only [n, n_text]."""
        n = int(n)
        if n < 1:
            raise IsoEnergyError(f"n must be >= 1, got {n}")
        g = torch.Generator().manual_seed(int(seed) * 1_000_003 + self.seed)
        a = self.atoms
        idx = torch.multinomial(
            self.concept_probs.expand(n, -1), self.active_shared, replacement=False, generator=g
        )
        coef = 0.5 + torch.rand(n, self.active_shared, generator=g)
        shared = torch.zeros(n, self.n_shared).scatter_(1, idx, coef)  # [n, C]
        img_only = torch.zeros(n, self.n_image)
        img_only[torch.arange(n), torch.randint(self.n_image, (n,), generator=g)] = 0.5 + torch.rand(
            n, generator=g
        )
        txt_only = torch.zeros(n, self.n_text)
        txt_only[torch.arange(n), torch.randint(self.n_text, (n,), generator=g)] = 0.5 + torch.rand(
            n, generator=g
        )
        img = shared @ a["image_shared"] + img_only @ a["image"] + self.bias * a["bias_image"]
        txt = (
            self.text_amplitude * shared @ a["text_shared"]
            + txt_only @ a["text"]
            + self.bias * a["bias_text"]
        )
        img = img + self.noise * torch.randn(n, self.d, generator=g)
        txt = txt + self.noise * torch.randn(n, self.d, generator=g)
        n_img, n_txt = img.norm(dim=1, keepdim=True), txt.norm(dim=1, keepdim=True)
        img, txt = img / n_img, txt / n_txt
        if not return_codes:
            return img, txt
        codes = {
            "raw_image": shared,
            "raw_text": self.text_amplitude * shared,
            "shared_image": shared / n_img,
            "shared_text": self.text_amplitude * shared / n_txt,
            "image_only": img_only / n_img,
            "text_only": txt_only / n_txt,
        }
        return img, txt, codes
