"""``iclr26-petri``: reproduce the claims; train/embed/profile on a user's AnnData + image arrays.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays fast).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", required=True, help="image array (n, C, H, W): .npy or .zarr")
    p.add_argument("--image-obs", required=True, help="CSV with one row per image cell (needs --context-key)")
    p.add_argument(
        "--expression", required=True, help="AnnData .h5ad (counts in layers['counts'] or integer X)"
    )
    p.add_argument("--context-key", required=True, help="obs column of the shared context (e.g. guide)")
    p.add_argument("--out", required=True, help="new checkpoint directory (model + train_log.csv)")
    p.add_argument("--steps", type=int, default=1000, help="training steps (default 1000)")
    p.add_argument("--documents", type=int, default=16, help="documents per batch G (default 16)")
    p.add_argument("--cells-per-document", type=int, default=16, help="cells per modality S (default 16)")
    m = p.add_argument_group(
        "model (defaults: the paper's L = 8 and mask ratio 0.75; the rest are the documented paper-scale "
        "defaults of scale=paper, not stated by the paper)"
    )
    m.add_argument("--n-latents", type=int, default=8, help="latent tokens per cell L (paper: 8)")
    m.add_argument("--mask-ratio", type=float, default=0.75, help="masked fraction of tokens (paper: 0.75)")
    m.add_argument("--patch-size", type=int, default=16, help="image patch side (default 16)")
    m.add_argument("--hidden-size", type=int, default=384, help="width D (default 384)")
    m.add_argument("--num-heads", type=int, default=6, help="attention heads (default 6)")
    m.add_argument("--image-layers", type=int, default=6, help="ViT blocks of the image encoder (default 6)")
    m.add_argument("--perceiver-rounds", type=int, default=2, help="Perceiver rounds (default 2)")
    m.add_argument("--mst-layers", type=int, default=4, help="Multimodal Set Transformer blocks (default 4)")
    m.add_argument("--decoder-layers", type=int, default=2, help="image decoder blocks (default 2)")
    p.add_argument(
        "--likelihood",
        choices=["nb", "mse"],
        default="nb",
        help="expression loss (default nb, needs counts; mse also takes log-normalised X)",
    )
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (default 3e-4)")
    p.add_argument("--weight-decay", type=float, default=0.05, help="AdamW weight decay (default 0.05)")
    p.add_argument(
        "--warmup", type=int, default=50, help="linear warm-up steps before the cosine schedule (default 50)"
    )
    p.add_argument("--permute", action="store_true", help="train the permuted-document control")
    p.add_argument(
        "--pair-key",
        default=None,
        help="obs column (both modalities) of pair ids for partially paired cells; empty = unpaired "
        "(an extension, not in the paper: a pair shares a document slot)",
    )
    p.add_argument("--seed", type=int, default=0)


def _embed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="checkpoint directory written by `train`")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--images", help="image array (n, C, H, W): .npy or .zarr")
    g.add_argument("--expression", help="AnnData .h5ad (cell ids: its obs names)")
    p.add_argument("--image-obs", default=None, help="CSV with one row per image cell, for the cell ids")
    p.add_argument(
        "--id-key", default="cell_id", help="column of --image-obs holding the ids (default cell_id)"
    )
    p.add_argument("--out", required=True, help="output .npz (embeddings, cell ids)")


def _profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--embeddings", nargs=2, required=True, metavar=("IMG_NPZ", "EXPR_NPZ"))
    p.add_argument("--obs", nargs=2, required=True, metavar=("IMG_CSV", "EXPR_CSV"))
    p.add_argument("--context-key", default="guide", help="obs column of the guide (default guide)")
    p.add_argument("--gene-key", default=None, help="obs column of the target gene (default: the context)")
    p.add_argument("--batch-key", default=None, help="obs column of the batch/well for robust scaling")
    p.add_argument("--control-value", required=True, help="value of the controls, e.g. NTC")
    p.add_argument("--positives", default=None, help="CSV of known gene pairs (two columns) for TPR@5%%FPR")
    p.add_argument("--out", required=True, help="new output directory")


app = paper_cli(
    slug="petri",
    title="PETRI: early-fusion joint reconstruction of unpaired cell images and expression",
    reproduce="iclr26_petri.reproduce:run",
    verbs=[
        Verb(
            "train",
            "train PETRI on unpaired images + AnnData grouped by a context column",
            run="iclr26_petri.commands:train",
            arguments=_train_args,
        ),
        Verb(
            "embed",
            "pre-MST cell embeddings of images or expression with a trained model",
            run="iclr26_petri.commands:embed",
            arguments=_embed_args,
        ),
        Verb(
            "profile",
            "perturbation profiles, guide consistency and relationship recall from embeddings",
            run="iclr26_petri.commands:profile",
            arguments=_profile_args,
        ),
    ],
    description="Learn one cell embedding from unpaired modalities grouped by perturbation.",
)
main = app
