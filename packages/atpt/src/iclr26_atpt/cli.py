"""``iclr26-atpt``: reproduce the claims; `tune` a user's CLIP on an image folder; `dispersion` of its prompts.

Thin: argparse definitions only. Nothing here imports torch (``--help`` stays fast).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, metavar="ID_OR_PATH", help="a transformers CLIP folder or hub id"
    )
    p.add_argument(
        "--images", required=True, metavar="DIR", help="DIR/<class>/* (ImageFolder) or flat with --classes"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="new (or empty) output directory")
    p.add_argument("--classes", metavar="FILE", help="class names, one per line (label order)")
    p.add_argument("--regularizer", choices=["atpt", "ctpt", "otpt", "none"], default="atpt")
    p.add_argument("--lam", type=float, default=10.0, help="λ (default 10, the paper's natural-shift value)")
    p.add_argument("--views", type=int, default=64, help="augmented views per image, incl. the image (64)")
    p.add_argument("--selection", type=float, default=0.1, help="confidence-selection fraction ρ (0.1)")
    p.add_argument("--lr", type=float, default=5e-3, help="AdamW learning rate of the context (5e-3)")
    p.add_argument("--steps", type=int, default=1, help="TTA steps per image (1)")
    p.add_argument("--augment", choices=["augmix", "crop"], default="augmix")
    add_template_argument(p)
    p.add_argument(
        "--allow-negative-lambda",
        action="store_true",
        help="allow λ < 0: the released atpt_classification.py objective (+|λ|·AD), the paper's sign inverted",
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="zero-shot, TPT and the regulariser at each --lams value on the same views (λ < 0: released sign)",
    )
    p.add_argument(
        "--lams",
        type=float,
        nargs="+",
        default=[10.0, -10.0, 80.0, -80.0],
        metavar="LAM",
        help="λ values of --sweep (default 10 -10 80 -80)",
    )
    p.add_argument("--seed", type=int, default=0)


def add_template_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--template",
        default="a photo of a {}.",
        help='class prompt; the words before {} are the learnt context (default "a photo of a {}.", as CLIP)',
    )


def add_dispersion_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, metavar="ID_OR_PATH", help="a transformers CLIP folder or hub id"
    )
    p.add_argument("--classes", required=True, metavar="FILE", help="class names, one per line")
    add_template_argument(p)
    p.add_argument("--out", metavar="FILE", help="also write the numbers to this JSON file")


def add_sphere_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, default=10, help="number of unit vectors N (default 10)")
    p.add_argument("--d", type=int, default=32, help="dimension D (default 32)")
    p.add_argument("--regularizer", choices=["atpt", "ctpt", "otpt", "all"], default="all")
    p.add_argument("--steps", type=int, default=500, help="Adam steps (default 500)")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate (default 1e-2)")
    p.add_argument("--seed", type=int, default=0)


app = paper_cli(
    slug="atpt",
    peers_key="bench",  # peers=true|false sets it
    title="A-TPT: Angular Diversity Calibration for Test-Time Prompt Tuning (ICLR 2026)",
    reproduce="iclr26_atpt.reproduce:run",
    verbs=[
        Verb(
            "tune",
            "test-time prompt tuning (A-TPT/TPT/C-TPT/O-TPT) of a CLIP on an image folder",
            run="iclr26_atpt.commands:tune",
            arguments=add_tune_arguments,
        ),
        Verb(
            "sphere",
            "spread N collapsed unit vectors in R^D with each regulariser alone; print the minimum angle",
            run="iclr26_atpt.commands:sphere",
            arguments=add_sphere_arguments,
        ),
        Verb(
            "dispersion",
            "angular diversity, minimum angle, ATFD and orthogonality of a CLIP's class prompts",
            run="iclr26_atpt.commands:dispersion",
            arguments=add_dispersion_arguments,
        ),
    ],
    description="Keeps the class text features spread on the sphere so test-time-tuned predictions stay calibrated.",
)
main = app
