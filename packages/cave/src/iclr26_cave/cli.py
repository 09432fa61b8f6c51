"""``iclr26-cave``: reproduce the paper's claims; train CAVE on the user's renders; explain images with concept maps;
score any concept method's maps with 3D Consistency.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        required=True,
        help="folder of .npz shards: images [n,3,H,W] in [0,1], labels [n], pix_to_vertex [n,H,W] "
        "(-1 = background), vertices_<class> [V,3]",
    )
    p.add_argument("--out", required=True, help="new (or empty) folder for the model")
    p.add_argument(
        "--backbone", help="transformers backbone hub id or folder (default: a tiny random ResNet)"
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="steps=400 lr=1e-3 batch_size=32 feature_dim=32 n_concepts=8 min_visibility=0.1 distance=4 seed=0",
    )


def _explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="folder written by `iclr26-cave train`")
    p.add_argument("--images", required=True, help="folder of .png/.jpg images (or one .npz with images)")
    p.add_argument("--out", required=True, help="new (or empty) folder for overlays and contributions.json")
    p.add_argument("--top", type=int, default=3, help="concepts shown per image (default 3)")
    p.add_argument(
        "--method",
        choices=["feature", "lrp"],
        default="feature",
        help="feature: exact feature-level maps; lrp: pixel-level LRP through Φ (needs iclr26-cave[peers])",
    )


def _consistency_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attributions", required=True, help=".npz with attributions [N,T,H,W] (>= 0)")
    p.add_argument("--geometry", required=True, help=".npz with pix_to_vertex [N,H,W] and vertices [V,3]")
    p.add_argument("--out", required=True, help="new (or empty) folder for consistency.json")
    p.add_argument("--top-fraction", type=float, default=0.1, help="top attributed object pixels kept (0.1)")
    p.add_argument(
        "--sigma", type=float, default=0.1, help="smoothing, fraction of the object diameter (0.1)"
    )
    p.add_argument("--measure", choices=["js", "iou"], default="js")


app = paper_cli(
    slug="cave",
    peers_key="bench",  # peers=true|false sets it
    title="CAVE: concept-aware neural object volumes for explanations (ICLR 2026)",
    description="A 3D-aware image classifier whose logits are exact sums of concept contributions on the "
    "object's surface, and the 3D-Consistency metric for concept explanations.",
    reproduce="iclr26_cave.reproduce:run",
    verbs=[
        Verb(
            "train",
            "train CAVE (NOVUM + concepts) on .npz shards; writes the model folder and train_log.csv",
            run="iclr26_cave.commands:train",
            arguments=_train_args,
        ),
        Verb(
            "explain",
            "concept maps of a trained model for a folder of images; overlays + contributions.json",
            run="iclr26_cave.commands:explain",
            arguments=_explain_args,
        ),
        Verb(
            "consistency",
            "3D Consistency of any concept method's maps on meshes; writes consistency.json",
            run="iclr26_cave.commands:consistency",
            arguments=_consistency_args,
        ),
    ],
)
main = app
