"""Budget-aware Test-time Augmentation (bTTA): gain models and the cost-constrained trigger policy.

Gain model: g_a(f) = σ(w_a·f + b_a) ≈ Pr[action a fixes pass-1], one logistic regression per action fitted on
validation logs (label 1 iff pass-1 is wrong and action a is right), AdamW lr 1e-2, 80 full-batch epochs, on
the first four features [p_max, Δ, H, ρ] (κ exists only after QD has run).

Policy (budget B includes the pass-1 cost 1.0):
* ``"lagrangian"`` (the paper): the Lagrangian relaxation of max Σ_a g_a·W_a s.t. Σ_a C_a ≤ B − 1 — trigger a
  iff g_a·W_a ≥ τ·C_a, in decreasing order of g_a·W_a/C_a, skipping an action whose cost no longer fits.
* ``"greedy"`` (the official code): up to 2 rounds; take the unused affordable action with the largest
  u_a = g_a·W_a/C_a, stop if u_a < τ; the features are refreshed from that action's distribution when a
  ``refresh`` callback is given.
τ is found by bisection on [0, 5] (12 iterations, tolerance 0.02) to a target mean extra cost.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from iclr26_core.errors import UserError

from .features import FEATURES

POLICIES = ("lagrangian", "greedy")
SOLVERS = ("newton", "adamw")
ROUTER_FEATURES = ("p_max", "margin", "entropy", "rho")


@dataclass(frozen=True)
class Action:
    """A test-time action and its marginal cost (pass-1 = 1.00)."""

    name: str
    cost: float


# the paper's normalised marginal costs (Appendix F)
PAPER_ACTIONS = (Action("HR", 0.50), Action("tmRAG", 0.30), Action("QD", 0.35))


def _check_actions(actions: Sequence[Action | str], known: dict[str, float] | None = None) -> list[Action]:
    known = known or {a.name: a.cost for a in PAPER_ACTIONS}
    out = []
    for a in actions:
        if isinstance(a, str):
            if a not in known:
                raise UserError(f"unknown action {a!r}; known actions: {', '.join(known)}")
            a = Action(a, known[a])
        if not isinstance(a, Action) or not a.name or not a.cost > 0:
            raise UserError(f"an action needs a name and a positive cost, got {a!r}")
        out.append(a)
    if not out:
        raise UserError("the router needs at least one action")
    if len({a.name for a in out}) != len(out):
        raise UserError("action names must be unique")
    return out


def _features(x: Any, columns: Sequence[int]) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float32)
    if t.dim() != 2:
        raise UserError(f"router features must be [N, F], got shape {tuple(t.shape)}")
    return torch.nan_to_num(t[:, list(columns)], nan=0.0)


def calibrate_threshold(values: Any, routed_fraction: float) -> float:
    """RouteLLM-style: the threshold t such that a share ``routed_fraction`` of ``values`` is ≥ t."""
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    f = float(min(max(routed_fraction, 0.0), 1.0))
    if f <= 0:
        return float("inf")
    return float(torch.quantile(v, 1.0 - f))


class BudgetRouter:
    """Gain models + cost-constrained trigger policy (see the module docstring).

    >>> router = BudgetRouter(PAPER_ACTIONS, budget=2.0).fit(val_features, val_labels)
    >>> tau = router.tune(val_features, target_cost=0.5)
    >>> router.decide(test_features)          # [["HR"], [], ["tmRAG", "QD"], ...]
    """

    def __init__(
        self,
        actions: Sequence[Action | str] = PAPER_ACTIONS,
        budget: float = 2.0,
        policy: str = "lagrangian",
        *,
        features: Sequence[str] = ROUTER_FEATURES,
        weights: dict[str, float] | None = None,
        solver: str = "newton",
        epochs: int = 80,
        lr: float = 1e-2,
        ridge: float = 1e-4,
        max_rounds: int = 2,
        seed: int = 0,
    ) -> None:
        if budget < 1.0:
            raise UserError(f"budget must be >= 1.0 (it includes the pass-1 cost of 1.0), got {budget}")
        if solver not in SOLVERS:
            raise UserError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
        if policy not in POLICIES:
            raise UserError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        unknown = [f for f in features if f not in FEATURES]
        if unknown or not features:
            raise UserError(f"unknown router features {unknown}; choose from {', '.join(FEATURES)}")
        self.actions = _check_actions(actions)
        self.budget = float(budget)
        self.policy = policy
        self.feature_names = list(features)
        self.columns = [FEATURES.index(f) for f in features]
        self.weights = {a.name: float((weights or {}).get(a.name, 1.0)) for a in self.actions}
        self.solver, self.ridge = solver, float(ridge)
        self.epochs, self.lr, self.max_rounds, self.seed = int(epochs), float(lr), int(max_rounds), int(seed)
        # g = σ(((x − mean) / scale)·w + b); mean 0 / scale 1 for the official (unstandardised) fit
        self.mean = torch.zeros(len(self.columns))
        self.scale = torch.ones(len(self.columns))
        self.w = torch.zeros(len(self.actions), len(self.columns))
        self.b = torch.zeros(len(self.actions))
        self.tau = 0.0
        self.fitted = False
        self.info: dict[str, Any] = {}

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.actions]

    @property
    def costs(self) -> torch.Tensor:
        return torch.tensor([a.cost for a in self.actions])

    # --------------------------------------------------------------------------------- gain models
    def fit(self, features: Any, labels: Any) -> BudgetRouter:
        """Fit one logistic gain model per action. labels: [N, A] (0/1, actions in order) or {name: [N]}."""
        x = _features(features, self.columns)
        if isinstance(labels, dict):
            missing = [n for n in self.names if n not in labels]
            if missing:
                raise UserError(f"no gain labels for actions {missing}")
            y = torch.stack([torch.as_tensor(labels[n], dtype=torch.float32) for n in self.names], -1)
        else:
            y = torch.as_tensor(labels, dtype=torch.float32)
        if y.shape != (x.shape[0], len(self.actions)):
            raise UserError(
                f"gain labels must be [N={x.shape[0]}, A={len(self.actions)}], got {tuple(y.shape)}"
            )
        never = [n for j, n in enumerate(self.names) if not bool(y[:, j].any())]
        if len(never) == len(self.names):
            warnings.warn(
                f"no action ever fixes pass-1 on the {x.shape[0]} fitting items (every gain label is 0): the "
                "router predicts no gain and will not spend extra cost; check the validation logs",
                UserWarning,
                stacklevel=2,
            )
        elif never:
            warnings.warn(
                f"action(s) {never} never fix pass-1 on the {x.shape[0]} fitting items: gain 0, never triggered",
                UserWarning,
                stacklevel=2,
            )
        if self.solver == "newton":
            self.mean = x.mean(0)
            self.scale = x.std(0).clamp_min(1e-6)
            z = (x - self.mean) / self.scale
        else:
            self.mean, self.scale, z = torch.zeros(x.shape[1]), torch.ones(x.shape[1]), x
        gen = torch.Generator().manual_seed(self.seed)
        for j, name in enumerate(self.names):
            if name in never:
                self.w[j], self.b[j] = 0.0, float("-inf")
            elif self.solver == "newton":
                self.w[j], self.b[j] = _newton_logistic(z, y[:, j], self.ridge)
            else:
                self.w[j], self.b[j] = _adamw_logistic(z, y[:, j], self.epochs, self.lr, gen)
        self.info["never_fixes"] = never
        self.fitted = True
        return self

    def gains(self, features: Any) -> torch.Tensor:
        """g_a(f) for every item and action: [N, A]."""
        if not self.fitted:
            raise UserError("the router is not fitted (call fit or load a router)")
        x = (_features(features, self.columns) - self.mean) / self.scale
        return torch.sigmoid(x @ self.w.T + self.b)

    # -------------------------------------------------------------------------------------- policy
    def decide(
        self,
        features: Any,
        tau: float | None = None,
        refresh: Callable[[int, str], Any] | None = None,
    ) -> list[list[str]]:
        """The actions to trigger for each item, in the order they are taken."""
        tau = self.tau if tau is None else float(tau)
        g = self.gains(features)
        util = g * torch.tensor([self.weights[n] for n in self.names]) / self.costs
        spare = self.budget - 1.0 + 1e-9
        if self.policy == "lagrangian":
            return self._lagrangian(util, tau, spare)
        return [self._greedy(i, util[i], tau, spare, refresh) for i in range(g.shape[0])]

    def _lagrangian(self, util: torch.Tensor, tau: float, spare: float) -> list[list[str]]:
        """Vectorised over items: walk the actions in decreasing utility, add each one that clears τ and fits."""
        order = torch.argsort(-util, dim=1, stable=True)
        costs = self.costs.to(util.dtype)
        spent = torch.zeros(util.shape[0], dtype=util.dtype)
        taken = torch.zeros_like(util, dtype=torch.bool)
        rows = torch.arange(util.shape[0])
        for r in range(util.shape[1]):
            j = order[:, r]
            ok = (util[rows, j] >= tau) & (util[rows, j] > 0) & (spent + costs[j] <= spare)
            taken[rows[ok], j[ok]] = True
            spent = spent + torch.where(ok, costs[j], torch.zeros_like(spent))
        names = self.names
        out = []
        for i in range(util.shape[0]):
            out.append([names[int(j)] for j in order[i] if taken[i, j]])
        return out

    def _greedy(self, i: int, util: torch.Tensor, tau: float, spare: float, refresh: Any) -> list[str]:
        chosen: list[str] = []
        spent = 0.0
        for _ in range(self.max_rounds):
            best, best_u = None, -1.0
            for j, a in enumerate(self.actions):
                if a.name in chosen or spent + a.cost > spare:
                    continue
                if float(util[j]) > best_u:
                    best, best_u = j, float(util[j])
            if best is None or best_u < tau or best_u <= 0:
                break
            chosen.append(self.names[best])
            spent += self.actions[best].cost
            if refresh is not None:
                f = torch.as_tensor(refresh(i, self.names[best]), dtype=torch.float32).reshape(1, -1)
                util = (self.gains(f)[0] * torch.tensor([self.weights[n] for n in self.names])) / self.costs
        return chosen

    def extra_cost(self, decisions: Sequence[Sequence[str]]) -> torch.Tensor:
        """The extra cost (beyond pass-1) of each item's decision: [N]."""
        cost = {a.name: a.cost for a in self.actions}
        return torch.tensor([sum(cost[a] for a in d) for d in decisions], dtype=torch.float64)

    def tune(
        self,
        features: Any,
        target_cost: float,
        bounds: tuple[float, float] = (0.0, 5.0),
        iters: int = 12,
        tol: float = 0.02,
        refresh: Callable[[int, str], Any] | None = None,
    ) -> float:
        """Bisection on τ to a target mean extra cost (beyond pass-1) on ``features``; sets and returns τ."""
        if not 0.0 <= target_cost <= self.budget - 1.0:
            raise UserError(f"target cost {target_cost} is outside [0, budget - 1 = {self.budget - 1.0:g}]")
        lo, hi = float(bounds[0]), float(bounds[1])
        best = None
        for _ in range(int(iters)):
            mid = 0.5 * (lo + hi)
            cost = float(self.extra_cost(self.decide(features, mid, refresh)).mean())
            if best is None or abs(cost - target_cost) < abs(best[1] - target_cost):
                best = (mid, cost)
            if abs(cost - target_cost) <= tol:
                break
            if cost > target_cost:
                lo = mid  # too expensive: trigger less
            else:
                hi = mid
        assert best is not None
        if best[1] < target_cost - tol:
            warnings.warn(
                f"target extra cost {target_cost:g} is not reached on the tuning data (realised {best[1]:.3f}): "
                "the gain models predict too little gain; the router spends less",
                UserWarning,
                stacklevel=2,
            )
        self.tau = best[0]
        self.info.update(target_cost=float(target_cost), tuned_cost=best[1], tau=best[0])
        return self.tau

    # ------------------------------------------------------------------------------------ save/load
    def save(self, directory: str | Path) -> Path:
        """``router.safetensors`` (gain weights) and ``router.json`` (actions, budget, policy, τ) in ``directory``."""
        from safetensors.torch import save_file

        from iclr26_core.fs import write_json

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / ".router.safetensors.tmp"
        tensors = {"w": self.w, "b": self.b, "mean": self.mean, "scale": self.scale}
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
        tmp.replace(d / "router.safetensors")
        write_json(
            d / "router.json",
            {
                "actions": [{"name": a.name, "cost": a.cost} for a in self.actions],
                "budget": self.budget,
                "policy": self.policy,
                "solver": self.solver,
                "features": self.feature_names,
                "weights": self.weights,
                "tau": self.tau,
                "info": self.info,
            },
        )
        return d

    @classmethod
    def load(cls, directory: str | Path) -> BudgetRouter:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        d = Path(directory)
        try:
            meta = json.loads((d / "router.json").read_text())
            tensors = load_file(str(d / "router.safetensors"))
        except (OSError, json.JSONDecodeError, SafetensorError) as exc:
            raise UserError(f"cannot read a router from {str(d)!r} ({exc})") from None
        router = cls(
            [Action(a["name"], float(a["cost"])) for a in meta["actions"]],
            budget=float(meta["budget"]),
            policy=meta["policy"],
            features=meta["features"],
            weights=meta.get("weights"),
        )
        if tensors["w"].shape != router.w.shape:
            raise UserError(f"router weights in {str(d)!r} do not match its router.json")
        router.w, router.b = tensors["w"], tensors["b"]
        router.mean = tensors.get("mean", torch.zeros(len(router.columns)))
        router.scale = tensors.get("scale", torch.ones(len(router.columns)))
        router.solver = meta.get("solver", "adamw")
        router.tau = float(meta.get("tau", 0.0))
        router.info = meta.get("info", {})
        router.fitted = True
        return router


def _newton_logistic(
    x: torch.Tensor, y: torch.Tensor, ridge: float, iters: int = 100
) -> tuple[torch.Tensor, float]:
    """Logistic regression to convergence: Newton steps on mean log-loss + ridge/2·|w|² (bias unpenalised)."""
    n, d = x.shape
    a = torch.cat([x.double(), torch.ones(n, 1, dtype=torch.float64)], 1)
    t = y.double()
    theta = torch.zeros(d + 1, dtype=torch.float64)
    reg = torch.full((d + 1,), ridge, dtype=torch.float64)
    reg[-1] = 0.0
    for _ in range(iters):
        p = torch.sigmoid(a @ theta)
        grad = a.T @ (p - t) / n + reg * theta
        hess = (a.T * (p * (1 - p))) @ a / n + torch.diag(reg) + 1e-10 * torch.eye(d + 1, dtype=torch.float64)
        step = torch.linalg.solve(hess, grad)
        theta = theta - step
        if float(step.abs().max()) < 1e-10:
            break
    return theta[:d].float(), float(theta[d])


def _adamw_logistic(x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float, gen: torch.Generator):
    """The official fit: nn.Linear's default init, AdamW (weight decay 0), ``epochs`` full-batch steps."""
    lin = torch.nn.Linear(x.shape[1], 1)
    with torch.no_grad():  # nn.Linear's default init, drawn from our own generator
        bound = 1.0 / x.shape[1] ** 0.5
        lin.weight.uniform_(-bound, bound, generator=gen)
        lin.bias.uniform_(-bound, bound, generator=gen)
    opt = torch.optim.AdamW(lin.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(epochs):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(lin(x)[:, 0], y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return lin.weight.detach()[0], float(lin.bias.detach()[0])
