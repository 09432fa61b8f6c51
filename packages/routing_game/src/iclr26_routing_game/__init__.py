"""iclr26-routing-game: the Stackelberg game of LLM routing between a provider and a user — arXiv 2602.09902.

>>> import iclr26_routing_game as rg
>>> game = rg.RoutingGame(p1=0.4, p2=0.8, t1=1, t2=3, c1=1, c2=3, V=5, P=1)
>>> game.provider_optimum()            # Equilibrium(i=1, s=0.0, q=0.0, provider_cost=2.5, ...)
>>> game.throttling().gain             # 0.9
>>> rg.simulate(game, i=1, s=0.5, q=0.2, n=100_000)   # Monte Carlo with standard errors

Importing the package imports neither torch nor numpy: the public names below are loaded on first access
(PEP 562 module ``__getattr__``), so ``iclr26-routing-game --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-routing-game")

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "RoutingGame": "game",
    "Outcome": "game",
    "Equilibrium": "game",
    "Throttle": "game",
    "simulate": "monte_carlo",
    "sweep": "grids",
    "estimate_params": "estimate",
    "hf_solver": "estimate",
    "digits_solvers": "estimate",
    "generated_tasks": "estimate",
    "load_tasks": "estimate",
    "Params": "closed_form",
    "outcomes": "closed_form",
    "best_response": "user_response",
    "provider_optimum": "provider",
    "throttling": "throttle",
}

__all__ = [  # noqa: RUF022 - grouped: the game, simulation, sweeps, estimation, vectorised functions
    "__version__",
    "RoutingGame",
    "Outcome",
    "Equilibrium",
    "Throttle",
    "simulate",
    "sweep",
    "estimate_params",
    "hf_solver",
    "digits_solvers",
    "generated_tasks",
    "load_tasks",
    "Params",
    "outcomes",
    "best_response",
    "provider_optimum",
    "throttling",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .closed_form import Params, outcomes
    from .estimate import digits_solvers, estimate_params, generated_tasks, hf_solver, load_tasks
    from .game import Equilibrium, Outcome, RoutingGame, Throttle
    from .grids import sweep
    from .monte_carlo import simulate
    from .provider import provider_optimum
    from .throttle import throttling
    from .user_response import best_response

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
