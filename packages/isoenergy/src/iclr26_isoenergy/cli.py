"""``iclr26-isoenergy``: reproduce the claims; train / analyze SAE-A on a user's paired embeddings; close the gap.

Thin: argparse definitions only. Nothing here imports torch (``--help`` stays fast).
"""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _data_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--embeddings",
        metavar="FILE",
        help="a safetensors file with keys 'image' and 'text', [N, D] each (row i = pair i)",
    )
    src.add_argument(
        "--model",
        metavar="ID_OR_PATH",
        help="a transformers CLIP/SigLIP model folder or hub id (tiny-clip: a random tiny CLIP); needs --pairs",
    )
    p.add_argument(
        "--pairs", metavar="FILE", help='JSONL lines {"image": path, "text": caption} (with --model)'
    )
    p.add_argument("--batch-size", type=int, default=64, help="images/captions per forward pass (default 64)")


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--beta",
        type=float,
        default=None,
        help="β of the alignment term (default: the official demo's β for --model (CLIP B/32 4e-4, L/14 1e-4, "
        "SigLIP 1e-4, SigLIP2 7e-5, ...; 4e-4 otherwise) times D, our per-row-sum loss)",
    )
    p.add_argument("--n-atoms", type=int, default=None, help="K, dictionary size (default 8·D)")
    p.add_argument("--k", type=int, default=20, help="matching-pursuit steps (default 20)")
    p.add_argument("--epochs", type=int, default=5, help="epochs (default 5)")
    p.add_argument("--batch-pairs", type=int, default=512, help="pairs per batch (default 512)")
    p.add_argument("--lr", type=float, default=5e-4, help="OneCycle max learning rate (default 5e-4)")
    p.add_argument(
        "--align", choices=["cosine", "energy"], default="cosine", help="alignment term (Eq. 1: cosine)"
    )
    p.add_argument(
        "--eps", type=float, default=0.05, help="ε of the bimodal / unimodal labels (default 0.05)"
    )
    p.add_argument("--shuffle-pairs", type=float, default=0.0, help="fraction of mismatched training pairs")
    p.add_argument(
        "--unit-atom-norms",
        action="store_true",
        help="unit-norm atoms (standard MP); default: free norms, the official 'identity' normalisation",
    )
    p.add_argument("--free-atom-norms", action="store_true", help=argparse.SUPPRESS)  # the default since 0.2
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    p.add_argument("--out", required=True, metavar="DIR", help="new (or empty) output directory")


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    _data_args(p)
    _train_args(p)


def add_analyze_arguments(p: argparse.ArgumentParser) -> None:
    _data_args(p)
    _train_args(p)
    p.add_argument("--recall-batch", type=int, default=256, help="pairs per retrieval batch (default 256)")
    p.add_argument("--wasserstein-n", type=int, default=2000, help="rows per modality for the OT gap")


def add_close_gap_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sae", required=True, metavar="DIR", help="a directory written by `analyze` or `train`")
    p.add_argument("--embeddings", required=True, metavar="FILE", help="safetensors with 'image' and 'text'")
    p.add_argument(
        "--out", required=True, metavar="FILE", help="new .safetensors file for the bimodal-only rows"
    )
    p.add_argument("--recall-batch", type=int, default=256, help="pairs per retrieval batch (default 256)")


def add_findings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sae", required=True, metavar="DIR", help="a directory written by `analyze` or `train`")
    p.add_argument("--embeddings", required=True, metavar="FILE", help="safetensors with 'image' and 'text'")
    p.add_argument(
        "--edit",
        metavar="FILE",
        help="safetensors with 'source', 'edit', 'target' [N, D]: score the bimodal vector-arithmetic edit",
    )
    p.add_argument(
        "--bridge-quantile", type=float, default=0.999, help="bridge entries kept (official: top 0.1%%)"
    )
    p.add_argument("--recall-batch", type=int, default=256, help="rows per retrieval batch (default 256)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, metavar="DIR", help="new (or empty) output directory")


app = paper_cli(
    slug="isoenergy",
    peers_key="peers",  # peers=true|false sets it
    title="Cross-Modal Redundancy and the Geometry of Vision-Language Embeddings (Iso-Energy SAE-A, ICLR 2026)",
    reproduce="iclr26_isoenergy.reproduce:run",
    verbs=[
        Verb(
            "train",
            "train one Matching-Pursuit SAE-A on paired embeddings (or a CLIP's) and label its atoms",
            run="iclr26_isoenergy.commands:train",
            arguments=add_train_arguments,
        ),
        Verb(
            "analyze",
            "SAE and SAE-A on paired embeddings: energy report, modality gap, retrieval per intervention",
            run="iclr26_isoenergy.commands:analyze",
            arguments=add_analyze_arguments,
        ),
        Verb(
            "close-gap",
            "write the bimodal-only embeddings of a trained SAE; print DiM and recall@1 before and after",
            run="iclr26_isoenergy.commands:close_gap",
            arguments=add_close_gap_arguments,
        ),
        Verb(
            "findings",
            "p_acc modality probes, the bridge matrix and rho, and the bimodal vector-arithmetic edit (--edit)",
            run="iclr26_isoenergy.commands_findings:findings",
            arguments=add_findings_arguments,
        ),
    ],
    description="Bimodal and unimodal atoms of a dual encoder's shared space; the modality gap and its removal.",
)
main = app
