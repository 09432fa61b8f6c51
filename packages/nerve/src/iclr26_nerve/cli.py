"""``iclr26-nerve``: reproduce | analyze | track | configs. Thin: no torch at import time."""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, add_model_argument, paper_cli

from .config import NerVEConfig

_D = NerVEConfig()


def _model_and_out(p: argparse.ArgumentParser) -> None:
    add_model_argument(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", metavar="FILE", help="a UTF-8 text file")
    src.add_argument("--pydoc", action="store_true", help="Python's own pydoc topics (the default; offline)")
    p.add_argument("--seq-len", type=int, default=_D.seq_len, help="tokens per row (default %(default)s)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, mps (default %(default)s)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (new or empty)")


def _measure_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample-ratio", type=float, default=_D.sample_ratio, help="fraction of token rows kept")
    p.add_argument(
        "--gated-pre",
        choices=["gate", "up", "product_input"],
        default=_D.gated_pre,
        help="PreAct of gated FFNs (default: the gate branch, as the paper)",
    )
    p.add_argument(
        "--residual", action="store_true", help="also the residual stream x + FFN(x) after each block"
    )
    p.add_argument(
        "--arch",
        metavar="SPEC",
        help="FFN hook points for an architecture the registry lacks (default: detected from module "
        "names): blocks=PATH,pre=PATH,post=PATH[,gated=true,up=PATH,act=PATH,split=first_half]; "
        "blocks from the model root, the others inside one block",
    )
    p.add_argument(
        "--layers-per-pass",
        type=int,
        metavar="K",
        help="hold K layers' covariance accumulators at once, one pass over the tokens per K layers "
        "(memory 2·K·D² floats instead of 2·L·D²; default: all layers in one pass)",
    )


def add_analyze_arguments(p: argparse.ArgumentParser) -> None:
    _model_and_out(p)
    p.add_argument("--tokens", type=int, default=_D.tokens, help="tokens to analyse (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=8, help="rows per forward pass (default %(default)s)")
    p.add_argument("--layers", type=int, nargs="+", metavar="I", help="layer indices (default: all)")
    _measure_options(p)
    p.add_argument(
        "--no-center", action="store_true", help="uncentred second moment instead of the covariance"
    )


def add_track_arguments(p: argparse.ArgumentParser) -> None:
    _model_and_out(p)
    p.add_argument("--steps", type=int, required=True, help="optimizer steps")
    p.add_argument("--log-steps", type=int, default=50, help="measure every N steps (default %(default)s)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=8, help="rows per step (default %(default)s)")
    p.add_argument(
        "--probe",
        choices=["heldout", "train_batch"],
        default="heldout",
        help="measure a fixed held-out probe batch in eval mode (default), or the batch each measured "
        "step trained on (the official callback)",
    )
    p.add_argument(
        "--probe-rows", type=int, default=32, help="held-out rows in the probe batch (default %(default)s)"
    )
    _measure_options(p)
    p.add_argument("--seed", type=int, default=0)


app = paper_cli(
    slug="nerve",
    peers_key="peers",  # peers=true|false sets it
    title="NerVE: Nonlinear Eigenspectrum Dynamics in LLM Feed-Forward Networks",
    reproduce="iclr26_nerve.reproduce:run",
    verbs=[
        Verb(
            "analyze",
            "NerVE metrics of every FFN of a model on some text (nerve.json, nerve.csv, spectra.png)",
            run="iclr26_nerve.commands:analyze_cmd",
            arguments=add_analyze_arguments,
        ),
        Verb(
            "track",
            "train or fine-tune a model and track NerVE metrics during training "
            "(nerve_trajectory.jsonl, trajectory.png, checkpoint/)",
            run="iclr26_nerve.commands:track_cmd",
            arguments=add_track_arguments,
        ),
    ],
    description="Spectral entropy, participation ratio, early enrichment and JS divergence of FFN "
    "pre/post-activation covariances.",
)
main = app
