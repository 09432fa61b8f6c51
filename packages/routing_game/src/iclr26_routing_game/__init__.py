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

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-routing-game",
    {
        "game": "RoutingGame Outcome Equilibrium Throttle",
        "monte_carlo": "simulate",
        "grids": "sweep",
        "estimate": "estimate_params",
        "solvers": "hf_solver digits_solvers HFSampler BernoulliSolver",
        "tasks": "generated_tasks load_tasks cloze_tasks",
        "closed_form": "Params outcomes",
        "user_response": "best_response",
        "provider": "provider_optimum",
        "throttle": "throttling",
    },
)
