"""Block-wise memory allocation: a 0/1 program over (block, bit-width) choices.

    minimise Σ_{i,b} s_{i,b} x_{i,b}   s.t.  Σ_b x_{i,b} = 1 for every block i,   Σ_{i,b} x_{i,b}·Mem(b) ≤ M

with s the sensitivities (`kv_sensitivity`) and Mem(b) the bytes of one block's cache at b bits for
``max_len`` tokens (`mem_bytes`). Solved exactly with `scipy.optimize.milp` (HiGHS), or by enumerating
every combination when there are at most 10^5 of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from iclr26_core.errors import UserError

from .cache import mem_bytes

BRUTE_FORCE_LIMIT = 100_000


class InfeasibleBudget(UserError):
    """Even the cheapest allocation needs more memory than the budget."""


def _check(sens: np.ndarray, bit_choices: Sequence[int]) -> None:
    if sens.ndim != 2 or sens.shape[1] != len(bit_choices):
        raise UserError(
            f"sensitivity must have shape [n_blocks, {len(bit_choices)}] (one column per bit choice), "
            f"got {list(sens.shape)}"
        )
    if not np.isfinite(sens).all():
        raise UserError("sensitivity has NaN or infinite entries")


def solve_milp(sens: np.ndarray, cost: Sequence[float], budget: float) -> list[int]:
    """Index of the chosen column per row, minimising Σ sens under Σ cost ≤ budget (scipy's milp)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n, k = sens.shape
    cost = np.asarray(cost, dtype=float)
    one_hot = np.kron(np.eye(n), np.ones((1, k)))  # Σ_b x_{i,b} = 1
    mem = np.tile(cost, n)[None, :]
    res = milp(
        c=sens.reshape(-1),
        constraints=[LinearConstraint(one_hot, 1, 1), LinearConstraint(mem, -np.inf, budget)],
        integrality=np.ones(n * k),
        bounds=Bounds(0, 1),
    )
    if res.status != 0 or res.x is None:
        raise InfeasibleBudget(f"the allocation program has no solution ({res.message})")
    return [int(i) for i in np.round(res.x).reshape(n, k).argmax(1)]


def solve_brute_force(sens: np.ndarray, cost: Sequence[float], budget: float) -> list[int]:
    """The same program by enumerating every combination (ties: the first in lexicographic order)."""
    n, k = sens.shape
    best, best_val = None, np.inf
    for combo in itertools.product(range(k), repeat=n):
        if sum(cost[j] for j in combo) > budget:
            continue
        val = sum(sens[i, j] for i, j in enumerate(combo))
        if best is None or val < best_val - 1e-12 * abs(best_val):
            best, best_val = list(combo), val
    if best is None:
        raise InfeasibleBudget("no allocation fits the budget")
    return best


def allocate_memory(
    sensitivity,
    bit_choices: Sequence[int],
    budget_bytes: int,
    *,
    n_kv_heads: int,
    head_dim: int,
    max_len: int,
    group_size: int | None = None,
    count_scales: bool = True,
    method: str = "auto",
) -> list[int]:
    """Bits per block: the allocation of least total sensitivity whose Σ_i Mem(b_i) ≤ ``budget_bytes``.

    ``method``: ``auto`` (brute force when ≤ 10^5 combinations, else milp), ``milp`` or ``brute``.
    """
    sens = np.asarray(
        sensitivity.detach().cpu().double().numpy() if hasattr(sensitivity, "detach") else sensitivity,
        dtype=float,
    )
    bit_choices = [int(b) for b in bit_choices]
    _check(sens, bit_choices)
    if budget_bytes <= 0:
        raise UserError(f"the memory budget must be > 0 bytes, got {budget_bytes}")
    cost = [mem_bytes(b, max_len, n_kv_heads, head_dim, group_size, count_scales) for b in bit_choices]
    cheapest = min(cost) * sens.shape[0]
    if cheapest > budget_bytes:
        raise InfeasibleBudget(
            f"a budget of {budget_bytes} bytes cannot hold {sens.shape[0]} blocks at {max_len} tokens: "
            f"the smallest allocation ({min(bit_choices)} bit everywhere) needs {cheapest} bytes"
        )
    n_combos = len(bit_choices) ** sens.shape[0]
    if method == "brute" or (method == "auto" and n_combos <= BRUTE_FORCE_LIMIT):
        idx = solve_brute_force(sens, cost, budget_bytes)
    elif method in ("milp", "auto"):
        idx = solve_milp(sens, cost, budget_bytes)
    else:
        raise UserError(f"method must be auto, milp or brute, got {method!r}")
    return [bit_choices[j] for j in idx]
