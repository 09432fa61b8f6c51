"""Hadamard matrices of the orders QuaRot needs: 2^k·m for the base orders m listed in ``BASE_ORDERS``.

``hadamard_matrix(n)`` = Sylvester(2^k) ⊗ H_m with H_m:

* Paley I (q ≡ 3 mod 4 prime, order q + 1): 12 (q 11), 20 (19), 60 (59), 108 (107), 140 (139);
* Paley II (q ≡ 1 mod 4 prime, order 2(q + 1)): 28 (q 13), 36 (17), 148 (73);
* Williamson (order 4·43 = 172, Llama-2-7B's intermediate 11008 = 172·64): the Williamson array
  [[A, B, C, D], [−B, A, −D, C], [−C, D, A, −B], [−D, −C, B, A]] of four symmetric circulant ±1 matrices of
  order 43 with A² + B² + C² + D² = 172·I. The quadruple is a published mathematical object (Sloane's library
  of Hadamard matrices, ``had.172.will``, which QuaRot also stores as a full matrix); it is kept here as the
  first 22 signs of each circulant's first row, and the built matrix is checked (H·Hᵀ = 172·I) in the tests.

40 = 2·20 and the other 2^k multiples follow from the Kronecker product. Any other n (e.g. 52, 156: Llama-1
sizes) raises a clear error. The rotation of a model that uses them lives in `rotation`.
"""

from __future__ import annotations

import torch

from iclr26_core.errors import UserError

BASE_ORDERS = (1, 12, 20, 28, 36, 60, 108, 140, 148, 172)
# order: (prime q, Paley construction I or II)
_PALEY = {
    12: (11, 1),
    20: (19, 1),
    28: (13, 2),
    36: (17, 2),
    60: (59, 1),
    108: (107, 1),
    140: (139, 1),
    148: (73, 2),
}
# order 172: four symmetric circulants of order 43, first 22 entries of each first row (+ = 1, − = −1)
_WILLIAMSON = {
    172: (
        "+---++--++++-+-+++-++-",
        "++-++++++----+-+--++-+",
        "+++-+-++--+-+-++++-+--",
        "++---++++-+--+--++----",
    )
}


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _sylvester(n: int) -> torch.Tensor:
    H = torch.ones(1, 1, dtype=torch.float64)
    while H.shape[0] < n:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    return H


def _jacobsthal(q: int) -> torch.Tensor:
    """Q_ij = χ(j − i) with χ the quadratic character of GF(q), q prime."""
    squares = {(x * x) % q for x in range(1, q)}
    chi = torch.tensor([0.0] + [1.0 if a in squares else -1.0 for a in range(1, q)], dtype=torch.float64)
    idx = (torch.arange(q).unsqueeze(0) - torch.arange(q).unsqueeze(1)) % q
    return chi[idx]


def _paley(order: int) -> torch.Tensor:
    q, kind = _PALEY[order]
    Q = _jacobsthal(q)
    ones = torch.ones(q, 1, dtype=torch.float64)
    if kind == 1:  # q ≡ 3 (mod 4): S = [[0, 1ᵀ], [−1, Q]] is skew; H = I + S
        S = torch.cat(
            [torch.cat([torch.zeros(1, 1, dtype=torch.float64), ones.t()], 1), torch.cat([-ones, Q], 1)], 0
        )
        return torch.eye(q + 1, dtype=torch.float64) + S
    # q ≡ 1 (mod 4): C = [[0, 1ᵀ], [1, Q]] symmetric conference matrix; H = C⊗[[1,1],[1,−1]] + I⊗[[1,−1],[−1,−1]]
    C = torch.cat(
        [torch.cat([torch.zeros(1, 1, dtype=torch.float64), ones.t()], 1), torch.cat([ones, Q], 1)], 0
    )
    a = torch.tensor([[1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, -1.0], [-1.0, -1.0]], dtype=torch.float64)
    return torch.kron(C, a) + torch.kron(torch.eye(q + 1, dtype=torch.float64), b)


def _symmetric_circulant(half: str) -> torch.Tensor:
    h = torch.tensor([1.0 if c == "+" else -1.0 for c in half], dtype=torch.float64)
    row = torch.cat([h, h[1:].flip(0)])  # symmetric: row[j] = row[m − j]
    m = row.numel()
    idx = (torch.arange(m).unsqueeze(0) - torch.arange(m).unsqueeze(1)) % m
    return row[idx]


def _williamson(order: int) -> torch.Tensor:
    A, B, C, D = (_symmetric_circulant(h) for h in _WILLIAMSON[order])
    return torch.cat(
        [
            torch.cat([A, B, C, D], 1),
            torch.cat([-B, A, -D, C], 1),
            torch.cat([-C, D, A, -B], 1),
            torch.cat([-D, -C, B, A], 1),
        ],
        0,
    )


def has_hadamard(n: int) -> bool:
    """Whether `hadamard_matrix` can build order ``n``."""
    return any(n % m == 0 and _is_pow2(n // m) for m in BASE_ORDERS)


def hadamard_matrix(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A ±1 matrix H of order ``n`` with H·Hᵀ = n·I (not normalised)."""
    for m in sorted(BASE_ORDERS, reverse=True):
        if n % m == 0 and _is_pow2(n // m):
            if m == 1:
                base = _sylvester(1)
            elif m in _WILLIAMSON:
                base = _williamson(m)
            else:
                base = _paley(m)
            return torch.kron(_sylvester(n // m), base).to(dtype)
    raise UserError(
        f"no Hadamard matrix of order {n}: supported are 2^k·m with m in {', '.join(map(str, BASE_ORDERS))}"
    )


def random_hadamard(n: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Orthogonal Q = diag(s)·H/√n with random signs s (QuaRot's randomised Hadamard)."""
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (n,), generator=g).to(torch.float64) * 2 - 1
    return (signs.unsqueeze(1) * hadamard_matrix(n, torch.float64) / n**0.5).to(dtype)
