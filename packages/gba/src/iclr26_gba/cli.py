"""``iclr26-gba``: reproduce the claims; train / evaluate SAEs on a model's activations; toy studies.

Thin: argparse definitions only. Nothing here imports torch (``--help`` stays fast).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, add_model_argument, paper_cli


def _seed_init_out_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--bias-init",
        choices=["zero", "quantile"],
        default="zero",
        help="zero (default) or quantile: each neuron starts at its target frequency",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="new (or empty) output directory")


def _data_args(p: argparse.ArgumentParser) -> None:
    add_model_argument(p)
    p.add_argument(
        "--layer", type=int, required=True, help="hidden_states index (0 = embeddings, L = last block)"
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", metavar="FILE", help="a UTF-8 text file to run the model on")
    src.add_argument("--pydoc", action="store_true", help="the stdlib's pydoc topics (default; offline)")
    p.add_argument("--tokens", type=int, default=200_000, help="activation rows to collect (default 200000)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda ...")
    p.add_argument(
        "--activations",
        metavar="DIR",
        help="keep the activations in DIR (safetensors shards), or reuse them if DIR already holds them "
        "(default: a temporary directory, removed at the end)",
    )
    p.add_argument(
        "--shard-rows", type=int, default=65536, help="activation rows per shard file (default 65536)"
    )


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    _data_args(p)
    p.add_argument("--neurons", type=int, default=4096, help="M, SAE width (default 4096)")
    p.add_argument("--groups", type=int, default=10, help="K, neuron groups (default 10; 1 = BA)")
    p.add_argument("--htf", type=float, default=0.5, help="highest target frequency (default 0.5)")
    p.add_argument("--ltf", type=float, default=1e-3, help="lowest target frequency (default 1e-3)")
    p.add_argument("--every", type=int, default=50, help="T, steps between bias updates (default 50)")
    p.add_argument(
        "--spacing", choices=["geometric", "linear"], default="geometric", help="TAF grid (default geometric)"
    )
    p.add_argument("--gamma-minus", type=float, default=0.01, help="γ₋, bias step down (default 0.01)")
    p.add_argument("--gamma-plus", type=float, default=0.01, help="γ₊, bias step up (default 0.01)")
    p.add_argument(
        "--eps", type=float, default=1e-6, help="a neuron firing less often is dead (default 1e-6)"
    )
    p.add_argument(
        "--learn-pre-bias",
        action="store_true",
        help="let Adam move b_pre (default: frozen at the data mean; a learnable one undoes the adaptation)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=20000,
        help="at most this many optimiser steps (default 20000 = 400 bias updates at T = 50); "
        "training stops earlier once bias adaptation has converged",
    )
    p.add_argument(
        "--stop-on-convergence",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop once every group's median firing has been within --tolerance of its TAF for "
        "--patience consecutive bias updates (default: on)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=1.25,
        help="a group is on target when median firing / TAF is in [1/tol, tol] (default 1.25)",
    )
    p.add_argument(
        "--patience", type=int, default=5, help="consecutive on-target bias updates to stop (default 5)"
    )
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate (default 1e-4 for LLMs)")
    p.add_argument("--activation", choices=["relu", "jumprelu"], default="relu")
    p.add_argument(
        "--loss",
        choices=["mse", "normalized"],
        default="normalized",
        help="normalized = ½‖x̂−x‖²/‖x‖² (default for LLM activations)",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="train this many SAEs on the same activations and report their cross-seed consistency",
    )
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="continue a run saved by `train` (SAE, biases, groups, targets, Adam state) for --steps more",
    )
    _seed_init_out_args(p)


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sae", required=True, metavar="DIR", help="a directory written by `train`")
    p.add_argument("--out", required=True, metavar="DIR", help="new (or empty) output directory")
    p.add_argument(
        "--hook-name", help="SAELens hook name (default: from the layer, blocks.L-1.hook_resid_post)"
    )
    p.add_argument("--model-name", help="model name for SAELens's metadata (default: the one trained on)")


def add_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sae", required=True, metavar="DIR", help="a directory written by `train`")
    _data_args(p)
    p.add_argument(
        "--out", metavar="DIR", help="also write metrics.json and firing.png to this new directory"
    )


def add_synthetic_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--features", type=int, default=64, help="n, true features (default 64)")
    p.add_argument("--dim", type=int, default=32, help="d, ambient dimension (default 32)")
    p.add_argument(
        "--sparsity", default="2:0.5,8:0.5", help="s, or a mixture s:prob,... (default 2:0.5,8:0.5)"
    )
    p.add_argument("--method", default="gba", help="gba, ba, topk or l1 (default gba)")
    p.add_argument("--neurons", type=int, default=256)
    p.add_argument("--k", type=int, help="active neurons per row (topk)")
    p.add_argument("--l1", type=float, help="sparsity coefficient λ (l1)")
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--htf", type=float, default=0.2)
    p.add_argument("--ltf", type=float, default=1e-3)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3)
    _seed_init_out_args(p)


app = paper_cli(
    slug="gba",
    peers_key="peers.enabled",  # peers=true|false sets it
    title="Taming Polysemanticity in LLMs: Group Bias Adaptation SAEs (ICLR 2026)",
    reproduce="iclr26_gba.reproduce:run",
    verbs=[
        Verb(
            "train",
            "train a GBA SAE on a transformers model's residual activations",
            run="iclr26_gba.commands:train",
            arguments=add_train_arguments,
        ),
        Verb(
            "evaluate",
            "FVU, L0 and dead fraction of a trained SAE on a model's activations",
            run="iclr26_gba.commands:evaluate",
            arguments=add_evaluate_arguments,
        ),
        Verb(
            "export",
            "write a trained SAE in SAELens's format (cfg.json + sae_weights.safetensors)",
            run="iclr26_gba.commands:export",
            arguments=add_export_arguments,
        ),
        Verb(
            "synthetic",
            "train an SAE on the sparse superposition toy and score feature recovery",
            run="iclr26_gba.commands:synthetic",
            arguments=add_synthetic_arguments,
        ),
    ],
    description="SAEs without a sparsity penalty: neuron biases steered to target firing frequencies.",
)
main = app
