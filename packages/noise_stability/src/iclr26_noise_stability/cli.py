"""``iclr26-noise-stability``: reproduce the claims, measure a model's stability, train with the regulariser.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _common_reg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gamma", type=float, default=0.75, help="regulariser weight γ >= 0 (default 0.75)")
    p.add_argument("--rho", type=float, default=0.25, help="noise correlation ρ in [0, 1] (default 0.25)")
    p.add_argument(
        "--S", type=int, default=1, help="1: encourage stability (paper), 0: discourage (default 1)"
    )
    p.add_argument(
        "--noise",
        choices=["paper", "exact"],
        default="paper",
        help="paper: keep w.p. (1+ρ)/2; exact: keep w.p. ρ (default paper)",
    )


def _measure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="local model directory or hub id (tiny-gpt2 for a test run)"
    )
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    p.add_argument(
        "--seq-len", type=int, default=64, help="length of the random token sequences (default 64)"
    )
    p.add_argument("--rho", type=float, default=0.5, help="ρ of the reported stability (default 0.5)")
    p.add_argument(
        "--degree", type=int, default=15, help="bound the output mass at degree >= this (default 15)"
    )
    p.add_argument("--samples", type=int, default=256, help="random sequences (default 256)")
    p.add_argument("--noise", choices=["paper", "exact"], default="paper")
    p.add_argument("--text", help="a text file: also report the stability on its token blocks")
    p.add_argument("--seed", type=int, default=0)


def _finetune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="local causal-LM directory (with its tokenizer) or hub id")
    p.add_argument("--text", required=True, help="a UTF-8 text file to train on (last 10 %% held out)")
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    _common_reg(p)
    p.add_argument("--steps", type=int, default=200, help="optimizer steps (default 200)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--seq-len", type=int, default=64, help="tokens per training block (default 64)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=25, help="stability/validation loss every N steps")
    p.add_argument("--seed", type=int, default=0)


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="new (or empty) output directory")
    p.add_argument("--task", choices=["modular_addition", "sparse_parity"], default="modular_addition")
    p.add_argument("--p", type=int, default=47, help="modulus of modular addition (default 47)")
    p.add_argument("--train-fraction", type=float, default=0.5)
    _common_reg(p)
    p.add_argument("--steps", type=int, default=1500, help="step cap (default 1500)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=1.0)
    p.add_argument("--target", type=float, default=0.99, help="stop at this validation accuracy")
    p.add_argument("--seed", type=int, default=0)


app = paper_cli(
    slug="noise_stability",
    peers_key="peers",  # peers=true|false sets it
    title="Noise Stability of Transformer Models (ICLR 2026)",
    description="Noise stability as a simplicity measure of transformers, its spectral-tail bounds, and the "
    "noise-stability regulariser that catalyses grokking.",
    reproduce="iclr26_noise_stability.reproduce:run",
    verbs=[
        Verb(
            "measure",
            "noise stability, spectral-tail bounds and per-position influence of a model",
            run="iclr26_noise_stability.commands:measure",
            arguments=_measure_args,
        ),
        Verb(
            "finetune",
            "train a causal LM on a text file with the noise-stability regulariser",
            run="iclr26_noise_stability.commands:finetune",
            arguments=_finetune_args,
        ),
        Verb(
            "train",
            "one grokking run (modular addition or sparse parity) with the regulariser",
            run="iclr26_noise_stability.commands:train",
            arguments=_train_args,
        ),
    ],
)
main = app
