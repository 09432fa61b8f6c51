"""How well a learned dictionary recovers known atoms (the synthetic study), and reconstruction quality.

* R² = 1 − Σ‖x − x̂‖² / Σ‖x − mean(x)‖² over the stacked image and text rows.
* W (dictionary distance): mean (1 − cos) over a one-to-one (Hungarian) matching of the true atoms to learned
  atoms (rectangular: K ≥ number of true atoms).
* mma: mean over the true atoms of the highest cosine with any learned atom (the paper's definition is not
  public; inferred).
* merged rate: the fraction of shared concepts whose best-matching learned atom (by cosine) is the same for the
  image direction S_c and the text direction T_c, and is bimodal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def r2_score(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """1 − SSE/SST over all rows of x [N, D]."""
    x, x_hat = x.double(), x_hat.double()
    sse = ((x - x_hat) ** 2).sum()
    sst = ((x - x.mean(0, keepdim=True)) ** 2).sum()
    return float(1.0 - sse / sst)


def cosine_matrix(true: torch.Tensor, learned: torch.Tensor) -> torch.Tensor:
    """cos(true_i, learned_j): [T, D] x [K, D] -> [T, K] (float64)."""
    return F.normalize(true.double(), dim=1) @ F.normalize(learned.double(), dim=1).T


def dictionary_distance(true: torch.Tensor, learned: torch.Tensor) -> float:
    """Hungarian mean (1 − cos) between the true atoms [T, D] and distinct learned atoms [K, D], K ≥ T."""
    from scipy.optimize import linear_sum_assignment

    cost = (1.0 - cosine_matrix(true, learned)).numpy()
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def max_cosine_agreement(true: torch.Tensor, learned: torch.Tensor) -> float:
    """mma: mean over true atoms of max_j cos(true_i, learned_j)."""
    return float(cosine_matrix(true, learned).max(dim=1).values.mean())


def merged_rate(learned: torch.Tensor, shared: torch.Tensor, text_shared: torch.Tensor, labels) -> float:
    """Fraction of concepts c with argmax_j cos(S_c, d_j) = argmax_j cos(T_c, d_j) = j* and atom j* bimodal.

    learned [K, D]; shared, text_shared [C, D]; labels [K] (1 = bimodal, as `energy.LABEL_NAMES`).
    """
    from .energy import BIMODAL

    best_img = cosine_matrix(shared, learned).argmax(dim=1)
    best_txt = cosine_matrix(text_shared, learned).argmax(dim=1)
    merged = (best_img == best_txt) & (torch.as_tensor(labels)[best_img] == BIMODAL)
    return float(merged.double().mean())
