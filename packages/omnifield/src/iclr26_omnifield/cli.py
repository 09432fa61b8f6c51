"""``iclr26-omnifield``: reproduce the claims, fit a field on a sensor table, predict from it.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--table", required=True, help="long table (CSV/Parquet): time, x, y (or lon, lat), modality, value"
    )
    p.add_argument("--out", required=True, help="new (or empty) checkpoint directory")
    p.add_argument(
        "--modalities", default=None, help="modalities to use, e.g. T,H,W (default: all in the table)"
    )
    p.add_argument(
        "--max-horizon",
        type=float,
        default=2.0,
        help="longest forecast horizon in time units (default 2); every pair of table times at most this far "
        "apart trains the field, with its real time delta",
    )
    p.add_argument(
        "--time-unit",
        default="1D",
        help="the time unit when the time column holds dates (default 1D; e.g. 1h)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "overrides", nargs="*", metavar="key=value", help="model.KEY=V or train.KEY=V (e.g. train.steps=500)"
    )


def _predict_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="directory written by `fit`")
    p.add_argument("--table", required=True, help="observations (same columns as for fit)")
    p.add_argument("--time", required=True, help="the time whose observations condition the field")
    p.add_argument("--out", required=True, help="new output file (.csv or .parquet); PNG maps beside it")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--grid", default="64x64", help="query grid over the training extent (default 64x64)")
    g.add_argument("--query", default=None, help="CSV of query points with columns x, y")
    p.add_argument("--modalities", default=None, help="input modalities to use (default: all observed)")
    p.add_argument("--horizon", type=float, default=0.0, help="time units ahead of --time (default 0)")


def _pilot_args(p: argparse.ArgumentParser) -> None:
    from .pilot import arguments

    arguments(p)


app = paper_cli(
    slug="omnifield",
    peers_key="bench",  # peers=true|false sets it
    title="OmniField: Conditioned Neural Fields for Robust Multimodal Spatiotemporal Learning (ICLR 2026)",
    description="A continuity-aware neural field that reconstructs, interpolates and forecasts several "
    "correlated sensor fields from whatever sparse, noisy modalities are available.",
    reproduce="iclr26_omnifield.reproduce:run",
    verbs=[
        Verb(
            "fit",
            "train OmniField on a long sensor table",
            run="iclr26_omnifield.commands:fit",
            arguments=_fit_args,
        ),
        Verb(
            "predict",
            "predict any modality at any points and horizon from a fitted model",
            run="iclr26_omnifield.commands:predict",
            arguments=_predict_args,
        ),
        Verb(
            "pilot",
            "one arm, one seed of the miniature: loss curve and test RMSE (the README's sizing pilots)",
            run="iclr26_omnifield.pilot:run",
            arguments=_pilot_args,
        ),
    ],
)
main = app
