"""`RoutingGame`: one provider-user routing game (arXiv 2602.09902), solved exactly.

>>> g = RoutingGame(p1=0.4, p2=0.8, t1=1, t2=3, c1=1, c2=3, V=5, P=1)
>>> g.regime, g.xi
('value-dominated', (1.0, 1.0))
>>> eq = g.provider_optimum()          # Equilibrium(i=1, s=0.0, q=0.0, provider_cost=2.5, ...)
>>> g.throttling().gain                # 0.9: throttling pays at this churn penalty
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from iclr26_core.errors import UserError

from .closed_form import Params, outcomes, xi
from .provider import provider_optimum, regime
from .throttle import SUBSETS, closed_form_gain, throttling
from .user_response import TIE_BREAKS, best_response, s_high, s_low, s_zero


@dataclass(frozen=True)
class Outcome:
    """Expected success S, latency L, cost C, user utility U = V·S − L, provider cost J = C + P(1 − S).

    ``se`` holds Monte-Carlo standard errors (``simulate``), ``None`` for closed forms.
    """

    success: float
    latency: float
    cost: float
    user_utility: float
    provider_cost: float
    n: int | None = None
    se: dict[str, float] | None = None


@dataclass(frozen=True)
class Equilibrium:
    """The provider's optimum (i, s) and the user's best response q there (strong Stackelberg by default)."""

    i: int
    s: float
    q: float
    provider_cost: float
    user_utility: float
    escalates: bool
    success: float
    latency: float
    cost: float
    user_best: float
    gap: float


@dataclass(frozen=True)
class Throttle:
    """The provider's best latency throttle; utilities are at the latencies the user then experiences."""

    gain: float
    subset: str
    provider_cost_before: float
    provider_cost_after: float
    user_utility_before: float
    user_utility_after: float
    user_utility_throttle_both: float
    provider_cost_throttle_both: float
    latencies: tuple[float, float]
    P_star: float | None
    closed_form_gain: float | None = None


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise UserError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise UserError(f"{name} must be finite, got {value}")
    return value


def check_probability(name: str, value: Any) -> float:
    value = _number(name, value)
    if not 0.0 <= value <= 1.0:
        raise UserError(f"{name} must be in [0, 1], got {value:g}")
    return value


def check_model(i: Any) -> int:
    if i not in (1, 2) or isinstance(i, bool):
        raise UserError(f"model i must be 1 (standard) or 2 (reasoning), got {i!r}")
    return int(i)


@dataclass(frozen=True)
class RoutingGame:
    """Two models (1 standard, 2 reasoning): success p_i ∈ (0, 1], latency t_i ≥ 0, cost c_i ≥ 0 per pass;
    user value V > 0 of a solved task; provider churn penalty P ≥ 0 when the user abandons.

    ``tie_break``: "provider" (the user's ties go the provider's way: strong Stackelberg) or "user" (against
    it: weak Stackelberg). The paper assumes t1 < t2, c1 < c2, p1 < p2; nothing here requires it.
    """

    p1: float
    p2: float
    t1: float
    t2: float
    c1: float
    c2: float
    V: float
    P: float
    tie_break: str = field(default="provider", kw_only=True)

    def __post_init__(self) -> None:
        for f in fields(self)[:8]:
            object.__setattr__(self, f.name, _number(f.name, getattr(self, f.name)))
        for name in ("p1", "p2"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise UserError(f"{name} must be in (0, 1], got {getattr(self, name):g}")
        for name in ("t1", "t2", "c1", "c2", "P"):
            if getattr(self, name) < 0:
                raise UserError(f"{name} must be >= 0, got {getattr(self, name):g}")
        if self.V <= 0:
            raise UserError(f"V must be > 0, got {self.V:g}")
        if self.tie_break not in TIE_BREAKS:
            raise UserError(f"unknown tie_break {self.tie_break!r}; choose one of {', '.join(TIE_BREAKS)}")

    # ------------------------------------------------------------------------------------------ views
    @property
    def params(self) -> Params:
        return Params.of(**{k: getattr(self, k) for k in ("p1", "p2", "t1", "t2", "c1", "c2", "V", "P")})

    @property
    def xi(self) -> tuple[float, float]:
        x1, x2 = xi(self.params)
        return float(x1), float(x2)

    @property
    def regime(self) -> str:
        return str(regime(self.params))

    def replace(self, **kw: Any) -> RoutingGame:
        return RoutingGame(**{**self.to_dict(), **kw})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    # ------------------------------------------------------------------------------------------ maths
    def outcome(self, i: int, s: float, q: float) -> Outcome:
        """Closed-form outcome of provider policy (i, s) against abandonment probability q."""
        i, s, q = check_model(i), check_probability("s", s), check_probability("q", q)
        o = outcomes(self.params, i, s, q)
        return Outcome(*(float(a) for a in o))

    def user_best_response(self, i: int, s: float) -> float:
        """q*(i, s): the user's exact best response (Theorems 1-2)."""
        i, s = check_model(i), check_probability("s", s)
        return float(best_response(self.params, i, s, self.tie_break)[0])

    def provider_optimum(self) -> Equilibrium:
        """The provider's exact optimum against the user's best response (Theorems 3-5)."""
        e = provider_optimum(self.params, self.tie_break)
        vals = {k: v.item() for k, v in e._asdict().items()}
        vals["i"], vals["escalates"] = int(vals["i"]), bool(vals["escalates"])
        return Equilibrium(**vals)

    def misalignment_gap(self) -> float:
        """Δ_U = max over provider policies of the user's utility − the user's utility at the optimum."""
        return self.provider_optimum().gap

    def throttling(self) -> Throttle:
        """The provider's best throttle (Proposition 2) with the user's utility before and after."""
        t = throttling(self.params, self.tie_break)
        vals = {k: v.item() for k, v in t._asdict().items()}
        x1, x2 = self.xi
        value_dominated = x1 > 0 and x2 > 0
        return Throttle(
            gain=vals["gain"],
            subset=SUBSETS[int(vals["subset"])],
            provider_cost_before=vals["provider_cost_before"],
            provider_cost_after=vals["provider_cost_after"],
            user_utility_before=vals["user_utility_before"],
            user_utility_after=vals["user_utility_after"],
            user_utility_throttle_both=vals["user_utility_throttle_both"],
            provider_cost_throttle_both=vals["provider_cost_throttle_both"],
            latencies=(vals["t1"], vals["t2"]),
            P_star=vals["P_star"] if value_dominated else None,
            closed_form_gain=float(closed_form_gain(self.params)) if value_dominated else None,
        )

    def thresholds(self) -> dict[str, Any]:
        """The rules' thresholds in the game's own units (what RouteLLM users ask for, issue #36)."""
        g = self.params
        x1, x2 = self.xi
        dp = self.p2 - self.p1
        nan_none = lambda v: None if math.isnan(float(v)) else float(v)  # noqa: E731
        return {
            "xi": [x1, x2],
            "cost_of_pass": [self.c1 / self.p1, self.c2 / self.p2],
            "latency_of_pass": [self.t1 / self.p1, self.t2 / self.p2],
            "s0": nan_none(s_zero(g)),
            "s_L": nan_none(s_low(g, self.tie_break)),
            "s_H": nan_none(s_high(g)),
            "P_route_m2_if_both_leave": (self.c2 - self.c1) / dp if dp != 0 else None,
            "P_star_throttle": nan_none(throttling(g, self.tie_break).P_star) if x1 > 0 and x2 > 0 else None,
        }

    def solve(self) -> dict[str, Any]:
        """Everything at once, as plain JSON-able data: equilibrium, best responses, Δ_U, throttling."""
        eq = self.provider_optimum()
        return {
            "game": self.to_dict(),
            "regime": self.regime,
            "equilibrium": asdict(eq),
            "best_response": {
                "M2": self.user_best_response(2, 0.0),
                "M1_no_cascade": self.user_best_response(1, 0.0),
                "M1_full_cascade": self.user_best_response(1, 1.0),
            },
            "misalignment_gap": eq.gap,
            "throttling": asdict(self.throttling()),
            "thresholds": self.thresholds(),
        }
