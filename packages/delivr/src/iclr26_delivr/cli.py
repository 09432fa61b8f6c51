"""``iclr26-delivr``: reproduce the claims; train on paired frame folders; derain a video; evaluate a model.

Thin: parse, call the library, print. Nothing here imports torch (``--help`` stays instant).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="DIR/<sequence>/{rainy,clean}/*.png (same names in both)")
    p.add_argument(
        "--out", required=True, help="new (or empty) directory for the checkpoint and train_log.csv"
    )
    p.add_argument(
        "--resume",
        default=None,
        help="continue from a training state DIR-checkpoints/step-N (written with train.checkpoint_every=N)",
    )
    p.add_argument(
        "--checkpoints",
        default=None,
        help="where train.checkpoint_every=N writes step-N training states (default: <out>-checkpoints)",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides (conf/train.yaml): model=paper or model.<DeLiVRConfig field>, data.crop, data.val, "
        "data.augment, train.steps, train.lr, train.batch, train.ema, train.schedule, train.precision "
        "(auto|bf16|fp32), train.checkpoint_every, loss.<weight>, seed, device",
    )


def _derain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a checkpoint directory written by `train`")
    p.add_argument(
        "--input", required=True, help="a folder of frames (sorted by name) or an .npy [F, H, W, 3]"
    )
    p.add_argument("--out", required=True, help="new (or empty) directory for the restored PNGs")
    p.add_argument("--tile", type=int, default=None, help="tile size in pixels for large frames (e.g. 256)")
    p.add_argument(
        "--overlap", type=int, default=32, help="tile overlap blended with linear ramps (default 32)"
    )
    p.add_argument("--batch-size", type=int, default=1, help="windows per forward pass (default 1)")
    p.add_argument("--target", default=None, help="clean frames with the same names: adds metrics.json")


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a checkpoint directory written by `train` or `convert`")
    p.add_argument("--data", required=True, help="DIR/<sequence>/{rainy,clean}/*.png (same names in both)")
    p.add_argument(
        "--out", required=True, help="new (or empty) directory for summary.csv, frames.csv, metrics.json"
    )
    p.add_argument("--tile", type=int, default=None, help="tile size in pixels for large frames (e.g. 256)")
    p.add_argument(
        "--overlap", type=int, default=32, help="tile overlap blended with linear ramps (default 32)"
    )
    p.add_argument("--batch-size", type=int, default=1, help="windows per forward pass (default 1)")
    p.add_argument("--save-frames", action="store_true", help="also write the restored frames per sequence")


def _convert_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--official", required=True, help="official checkpoint (.pth from train_video5.py, or .safetensors)"
    )
    p.add_argument("--out", required=True, help="new (or empty) directory for the converted checkpoint")
    p.add_argument("--no-ema", action="store_true", help="take the raw weights, not the EMA copy")
    p.add_argument(
        "--official-mask-order",
        action="store_true",
        help="keep the official band mask before the per-head MLP (mask_after_mlp=False)",
    )


app = paper_cli(
    slug="delivr",
    peers_key="bench",  # peers=true|false sets it
    title="DeLiVR: Differential Spatiotemporal Lie Bias for Efficient Video Deraining (ICLR 2026)",
    description="Video deraining with a transformer whose attention knows each frame's rotation.",
    reproduce="iclr26_delivr.entry:run",  # lazy: imports are folded (entry.py)
    verbs=[
        Verb(
            "train",
            "train DeLiVR on paired rainy/clean frame folders",
            "iclr26_delivr.train_cmd:train",
            _train_args,
        ),
        Verb(
            "derain",
            "restore a video (folder of frames or .npy), optionally scored against --target",
            "iclr26_delivr.commands:derain_cmd",
            _derain_args,
        ),
        Verb(
            "evaluate",
            "PSNR/SSIM (RGB and Y) and flicker of a model over a folder of paired clips: a table and CSV",
            "iclr26_delivr.commands:evaluate_cmd",
            _evaluate_args,
        ),
        Verb(
            "convert",
            "load official DeLiVR weights (torch.load weights_only=True) into a checkpoint for derain",
            "iclr26_delivr.commands:convert_cmd",
            _convert_args,
        ),
    ],
)
main = app
