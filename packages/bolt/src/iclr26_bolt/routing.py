"""The routing analogues of the miniature and what each trigger policy achieves with them.

On the ODD student, with probabilities calibrated by τ_cal (fitted on validation pass-1 scores):
* pass-1: the low-resolution view (2 of 6 words);
* HR: re-score the high-resolution view (all 6 words);
* tmRAG: kNN over the student's mean-pooled prompt states in the training memory (same type, top K_r = 4),
  p' ∝ (1 − w)·p + w·v with v the neighbours' gold-option votes (w = 0.5) — an approximation of prepending
  the retrieved exemplars (flagged in the README); ρ = mean cosine of the K_r neighbours;
* QD: the mean of the distributions of K_d = 3 permutations of the low-resolution observation slots; κ from them.
Final answer: among pass-1 and the triggered actions, the candidate with the highest calibrated p_max.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .calibration import fit_temperature
from .experiment import SeedData, encode, gold, prompt_embeddings, raw_scores, softmax
from .features import agreement, router_features

ACTIONS = ("HR", "tmRAG", "QD")
# every subset of the actions as a bitmask over ACTIONS: index m has action j iff m >> j & 1
SUBSETS = [tuple(a for j, a in enumerate(ACTIONS) if m >> j & 1) for m in range(2 ** len(ACTIONS))]


def mask_of(actions: list[str] | tuple[str, ...]) -> int:
    return sum(1 << ACTIONS.index(a) for a in actions)


@dataclass
class Candidates:
    """Calibrated candidate distributions of one split: pass-1, HR, tmRAG, QD ([N, K] each) and signals."""

    p1: np.ndarray
    hr: np.ndarray
    rag: np.ndarray
    qd: np.ndarray
    qd_each: np.ndarray  # [N, K_d, K]
    rho: np.ndarray  # [N]
    kappa: np.ndarray  # [N]
    gold: np.ndarray  # [N]
    rag_majority_right: np.ndarray  # [N] bool: the neighbours' majority gold is this item's gold

    def stack(self) -> np.ndarray:
        """[N, 4, K]: pass-1, HR, tmRAG, QD."""
        return np.stack([self.p1, self.hr, self.rag, self.qd], axis=1)

    def features(self) -> torch.Tensor:
        return router_features(torch.from_numpy(self.p1), torch.from_numpy(self.rho), None)

    def gain_labels(self) -> np.ndarray:
        """[N, 3]: 1 iff pass-1 is wrong and the action's candidate is right (HR, tmRAG, QD)."""
        right = self.stack().argmax(-1) == self.gold[:, None]
        return (~right[:, :1] & right[:, 1:]).astype(np.float32)


@dataclass
class Outcomes:
    """For every item and every action subset: the final prediction's correctness, p_max and choice."""

    correct: np.ndarray  # [N, 8]
    pmax: np.ndarray  # [N, 8]
    pred: np.ndarray  # [N, 8]
    probs: np.ndarray  # [N, 8, K]

    def of(self, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = np.arange(len(masks))
        return self.correct[idx, masks], self.pmax[idx, masks], self.pred[idx, masks]


def outcomes(c: Candidates) -> Outcomes:
    cand = c.stack()  # [N, 4, K]
    n = len(c.gold)
    correct, pmax, pred, probs = (np.zeros((n, len(SUBSETS))) for _ in range(4))
    probs = np.zeros((n, len(SUBSETS), cand.shape[-1]))
    for m, subset in enumerate(SUBSETS):
        rows = [0] + [1 + ACTIONS.index(a) for a in subset]
        sub = cand[:, rows]  # [N, r, K]
        best = sub.max(-1).argmax(1)  # the candidate with the highest p_max
        chosen = sub[np.arange(n), best]
        probs[:, m] = chosen
        pmax[:, m] = chosen.max(-1)
        pred[:, m] = chosen.argmax(-1)
        correct[:, m] = pred[:, m] == c.gold
    return Outcomes(correct, pmax, pred.astype(np.int64), probs)


def qd_orders(seed: int, n_obs: int, k_d: int) -> list[list[int]]:
    """K_d distinct non-identity permutations of the observation slots (fixed per seed)."""
    rng = np.random.default_rng([seed, 23])
    orders: list[list[int]] = []
    while len(orders) < k_d:
        o = rng.permutation(n_obs).tolist()
        if o != list(range(n_obs)) and o not in orders:
            orders.append(o)
    return orders


def build_candidates(
    data: SeedData, cfg: Any, split: str, tau_cal: float, memory: dict[str, Any]
) -> Candidates:
    """Score pass-1, HR, QD views of a split with the ODD student and add retrieval."""
    model = data.models["odd"]
    items = data.val if split == "val" else data.test
    y = gold(items)
    s1 = data.arm_scores("odd", f"{split}/low")
    p1 = softmax(s1, tau_cal)
    hr = softmax(raw_scores(model, encode(data, items, "high"), data.pad_id), tau_cal)
    orders = qd_orders(data.seed, len(items[0]["obs"]), int(cfg.route.k_d))
    qd_each = np.stack(
        [softmax(raw_scores(model, encode(data, items, "low", o), data.pad_id), tau_cal) for o in orders], 1
    )
    qd = qd_each.mean(1)
    kappa = agreement(torch.from_numpy(qd_each)).numpy()
    rho, votes, major = retrieve(data, items, memory, int(cfg.route.k_r))
    w = float(cfg.route.rag_weight)
    rag = (1 - w) * p1 + w * votes
    rag = rag / rag.sum(-1, keepdims=True)
    return Candidates(
        p1,
        hr,
        rag,
        qd,
        qd_each,
        rho,
        kappa,
        y,
        major == np.array([it["objects"][it["answer"]] for it in items]),
    )


def memory_of(data: SeedData) -> dict[str, Any]:
    """The retrieval memory: the training items' prompt embeddings (their own view), types and gold objects."""
    emb = prompt_embeddings(data.models["odd"], data.enc["train"], data.pad_id)
    return {
        "emb": emb,
        "type": np.array([it["type"] for it in data.train]),
        "gold_obj": np.array([it["objects"][it["answer"]] for it in data.train]),
    }


def retrieve(data: SeedData, items: list[dict[str, Any]], memory: dict[str, Any], k_r: int):
    """(ρ [N], votes [N, K], majority gold object [N]) from the same-type top-K_r neighbours."""
    q = prompt_embeddings(
        data.models["odd"], data.enc["val/low" if items is data.val else "test/low"], data.pad_id
    )
    n, k = len(items), len(items[0]["options"])
    rho, votes, major = np.zeros(n), np.zeros((n, k)), np.zeros(n, dtype=np.int64)
    for t in np.unique(memory["type"]):
        rows = np.array([i for i, it in enumerate(items) if it["type"] == t])
        if len(rows) == 0:
            continue
        mem = memory["type"] == t
        sims = q[rows] @ memory["emb"][mem].T
        top = np.argsort(-sims, axis=1)[:, :k_r]
        rho[rows] = np.take_along_axis(sims, top, 1).mean(1)
        neigh = memory["gold_obj"][mem][top]  # [n_t, k_r]
        for r, i in enumerate(rows):
            objs = items[i]["objects"]
            votes[i] = [(neigh[r] == o).mean() for o in objs]
            vals, counts = np.unique(neigh[r], return_counts=True)
            major[i] = vals[counts.argmax()]
    return rho, votes, major


def calibrate(data: SeedData) -> float:
    """τ_cal of the ODD student on validation pass-1 scores."""
    return fit_temperature(data.arm_scores("odd", "val/low"), gold(data.val))


def ladder(target: float, costs: dict[str, float], budget: float) -> tuple[str, ...]:
    """The single-signal baseline's action bundle: the shortest prefix of (HR, tmRAG, QD) whose cost reaches
    the target, within the budget (HR alone for targets up to C_HR)."""
    bundle: tuple[str, ...] = ()
    for a in ACTIONS:
        if sum(costs[b] for b in (*bundle, a)) > budget - 1.0 + 1e-9:
            break
        bundle = (*bundle, a)
        if sum(costs[b] for b in bundle) >= target - 1e-9:
            break
    return bundle


def subsets_table(o: Outcomes, costs: dict[str, float], budget: float) -> list[dict[str, Any]]:
    """Always-on rows: every non-empty action subset applied to every item."""
    rows = []
    for m, subset in enumerate(SUBSETS):
        if not subset:
            continue
        cost = sum(costs[a] for a in subset)
        rows.append(
            {
                "actions": "+".join(subset),
                "acc": float(o.correct[:, m].mean()),
                "extra_cost": cost,
                "within_budget": cost <= budget - 1.0 + 1e-9,
            }
        )
    return rows


def random_assignment(o: Outcomes, masks: np.ndarray) -> np.ndarray:
    """Expected per-item correctness when the same multiset of action subsets is dealt to items at random."""
    freq = np.bincount(masks, minlength=len(SUBSETS)) / len(masks)
    return o.correct @ freq


def paired_boot_se(diff: np.ndarray, n_boot: int, seed: int) -> float:
    """Bootstrap standard error of the mean of per-item paired differences."""
    rng = np.random.default_rng([seed, 31])
    idx = rng.integers(0, len(diff), size=(n_boot, len(diff)))
    return float(diff[idx].mean(1).std(ddof=1))


def all_subsets() -> list[tuple[str, ...]]:
    return [s for r in range(1, len(ACTIONS) + 1) for s in itertools.combinations(ACTIONS, r)]
