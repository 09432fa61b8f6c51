"""``iclr26-qprompt``: reproduce the claims; train on an image/label folder; segment images; measure FPS.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data", required=True, help="DIR/images/*.png and DIR/labels/*.png (class ids, 255 = ignore)"
    )
    p.add_argument("--num-classes", type=int, required=True, help="number of classes C (ids 0..C-1)")
    p.add_argument(
        "--out", required=True, help="new (or empty) directory for the model, train_log.csv, metrics.json"
    )
    p.add_argument(
        "--model", default=None, help="EoMT checkpoint (hub id or path) to fine-tune; default: tiny random"
    )
    p.add_argument("--no-grqa", action="store_true", help="train with L_seg only (the QPrompt baseline)")
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of the images held out (seeded) for validation mIoU every train.eval_every steps "
        "(default 0.1; 0: train on all, no validation)",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides (conf/train.yaml): model.num_queries, model.num_blocks, model.mask_annealing, "
        "grqa.<GRQAConfig field>, train.steps, train.batch_size, train.lr, seed",
    )


def _segment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="a model directory written by `train` (or any EoMT/Mask2Former)"
    )
    p.add_argument("--images", required=True, help="a folder of .png images (the model's image size)")
    p.add_argument("--out", required=True, help="new (or empty) directory for label PNGs and overlays")
    p.add_argument(
        "--labels", default=None, help="label PNGs with the same names: adds metrics.json (IoU, mIoU)"
    )


def _fps_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="model directory or hub id, or tiny-qprompt / tiny-mask2former"
    )
    p.add_argument("--size", default=None, help="HxW, e.g. 64x64 (default: the model's image size)")
    p.add_argument("--batch", type=int, default=1, help="images per forward pass (default 1)")
    p.add_argument("--iters", type=int, default=30, help="timed runs (default 30, after 5 warm-ups)")
    p.add_argument("--out", default=None, help="new (or empty) directory for fps.json (default: print only)")


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--objectives", default="mean,expected", help="GRQA readings: sum, mean, expected")
    p.add_argument("--weights", default="0.1,0.3,1", help="λ values, comma-separated (default 0.1,0.3,1)")
    p.add_argument("--seeds", type=int, default=2, help="seeds seed, seed+1, ... (default 2)")
    p.add_argument("--out", default=None, help="write the rows to this JSON file")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="reproduce config overrides, e.g. scale=smoke model.num_queries=16 grqa.group_size=8",
    )


app = paper_cli(
    slug="qprompt",
    peers_key="bench",  # peers=true|false sets it
    title="QPrompt-R1: Real-Time Reasoning for Domain-Generalized Semantic Segmentation via Group-Relative "
    "Query Alignment (ICLR 2026)",
    description="A ViT with learnable queries in its last block only, trained with GRQA.",
    reproduce="iclr26_qprompt.reproduce:run",
    verbs=[
        Verb(
            "train",
            "train QPrompt (+ GRQA) on an image/label folder",
            "iclr26_qprompt.commands:train_cmd",
            _train_args,
        ),
        Verb(
            "segment",
            "segment a folder of images (label PNGs + overlays; with --labels, mIoU)",
            "iclr26_qprompt.commands:segment_cmd",
            _segment_args,
        ),
        Verb(
            "fps",
            "frames per second at batch 1, with what was timed",
            "iclr26_qprompt.commands:fps_cmd",
            _fps_args,
        ),
        Verb(
            "sweep",
            "GRQA λ per objective reading vs the plain arm, paired per seed",
            "iclr26_qprompt.sweep:sweep_cmd",
            _sweep_args,
        ),
        Verb("speed", "the same as `fps` (the spec's name)", "iclr26_qprompt.commands:fps_cmd", _fps_args),
    ],
)
main = app
