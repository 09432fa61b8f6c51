"""``iclr26-routing-game``: reproduce the paper's claims, solve a game, sweep a grid, estimate (p, t, c).

Thin: parse, call the library, print. Nothing here imports numpy or torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli

PARAMS = ("p1", "p2", "t1", "t2", "c1", "c2", "V", "P")
HELP = {
    "p1": "success probability per pass of M1 (standard), in (0, 1]",
    "p2": "success probability per pass of M2 (reasoning), in (0, 1]",
    "t1": "latency per pass of M1 (user's value units)",
    "t2": "latency per pass of M2",
    "c1": "provider cost per pass of M1",
    "c2": "provider cost per pass of M2",
    "V": "user's value of a solved task (> 0)",
    "P": "provider's churn penalty when the user abandons (>= 0)",
}


def _game_args(p: argparse.ArgumentParser, required: bool) -> None:
    for name in PARAMS:
        p.add_argument(f"--{name}", type=float, required=required, help=HELP[name])
    p.add_argument(
        "--tie-break",
        choices=["provider", "user"],
        default="provider",
        help="who the user's ties favour: provider (strong Stackelberg, default) or user (weak)",
    )


def _solve_args(p: argparse.ArgumentParser) -> None:
    _game_args(p, required=True)
    p.add_argument("--json", metavar="FILE", help="also write the solution, inputs and version as JSON")


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--x", required=True, help=f"parameter on the x axis ({', '.join(PARAMS)})")
    p.add_argument("--y", required=True, help="parameter on the y axis")
    p.add_argument(
        "--fixed",
        default="",
        help="the other parameters, e.g. p1=0.3,p2=0.8 (defaults: p1=0.4,p2=0.8,t1=1,t2=3,c1=1,c2=3,V=5,P=2)",
    )
    p.add_argument("--x-range", default=None, help="LO,HI of the x axis (default: the random-game law)")
    p.add_argument("--y-range", default=None, help="LO,HI of the y axis")
    p.add_argument("--n", type=int, default=201, help="grid points per axis (default 201)")
    p.add_argument("--tie-break", choices=["provider", "user"], default="provider")
    p.add_argument("--out", required=True, help="new (or empty) output directory: sweep.csv + heat-maps")


def _estimate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-a", help="the standard model (M1): local transformers directory or hub id")
    p.add_argument("--model-b", help="the reasoning model (M2)")
    p.add_argument(
        "--tasks",
        default="generated",
        help="digits (scikit-learn demo, no models), generated (arithmetic multiple choice) or a "
        "JSON-lines file of {question, choices, answer[, type]} or {prompt, target[, type]} (default generated)",
    )
    p.add_argument("--n-tasks", type=int, default=40, help="number of generated tasks (default 40)")
    p.add_argument("--value", type=float, required=True, help="user's value V of a solved task")
    p.add_argument("--churn-penalty", type=float, default=0.0, help="provider's churn penalty P (default 0)")
    p.add_argument(
        "--time-value",
        type=float,
        default=1.0,
        help="value units per second of waiting (t = CPU seconds per pass x this; default 1)",
    )
    p.add_argument("--retries", type=int, default=8, help="independent sampled passes per task (default 8)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, > 0 (default 1)")
    p.add_argument(
        "--repeats", type=int, default=7, help="timed passes per model; the median is used (default 7)"
    )
    p.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="per-token time in process CPU (default) or wall seconds",
    )
    p.add_argument(
        "--n-boot", type=int, default=1000, help="bootstrap draws for the intervals (default 1000)"
    )
    p.add_argument(
        "--cost",
        type=float,
        nargs=2,
        metavar=("C1", "C2"),
        help="cost per call of each model (default: FLOPs per call / --flops-unit)",
    )
    p.add_argument("--flops-unit", type=float, default=1e9, help="FLOPs per cost unit (default 1e9)")
    p.add_argument("--device", default="cpu", help="device for the models (default cpu)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="new (or empty) output directory: estimate.json")


app = paper_cli(
    slug="routing_game",
    peers_key="bench",  # peers=true|false sets it
    title="Routing, Cascades, and User Choice for LLMs (ICLR 2026)",
    description="The Stackelberg game between an LLM provider that routes (and cascades) between a standard "
    "and a reasoning model and a user who re-prompts or abandons: best responses, the provider's optimum, the "
    "misalignment gap and throttling, in closed form.",
    reproduce="iclr26_routing_game.reproduce:run",
    verbs=[
        Verb(
            "solve",
            "solve one game: equilibrium, best responses, gap, throttling, thresholds",
            run="iclr26_routing_game.commands:solve",
            arguments=_solve_args,
        ),
        Verb(
            "sweep",
            "equilibria on a grid of two parameters: CSV and heat-maps",
            run="iclr26_routing_game.commands:sweep",
            arguments=_sweep_args,
        ),
        Verb(
            "estimate",
            "estimate (p, t, c) of two models from sampled retries, with intervals, and solve their game",
            run="iclr26_routing_game.commands:estimate",
            arguments=_estimate_args,
        ),
    ],
)
main = app
