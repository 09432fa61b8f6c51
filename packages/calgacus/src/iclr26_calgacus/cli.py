"""The ``iclr26-calgacus`` command line (thin: parse, call the library, print). No torch at import time."""

from __future__ import annotations

import argparse

from iclr26_core.cli import Verb, paper_cli


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        required=True,
        help="local model dir, hub id, or 'tiny' (the package's char LM, trained once and cached)",
    )
    k = p.add_mutually_exclusive_group(required=True)
    k.add_argument("--key", help="the key prompt k (public-looking; sets the cover's topic and style)")
    k.add_argument("--key-file", help="read the key prompt from this UTF-8 file")
    p.add_argument("--prefix", default="A text:", help="the secret prefix k' (default: %(default)r)")
    p.add_argument(
        "--admissible",
        choices=["all", "canonical"],
        default=None,
        help="cover alphabet filter (default: canonical for BPE tokenizers, all for char vocabularies)",
    )
    p.add_argument("--trailer", default=None, help="fixed trailer appended to the secret (e.g. '.\\n\\n')")
    p.add_argument(
        "--whitespace",
        choices=["exact", "lf"],
        default=None,
        help="declared normalisation: 'lf' reads CR LF / CR as LF (the cover avoids CR); default exact, "
        "or the encoder's record",
    )
    p.add_argument("--out", required=True, help="output file (must not exist)")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")


def _encode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--secret-file", required=True, help="the secret text (UTF-8)")
    _common(p)


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stego-file",
        required=True,
        help="the stegotext (UTF-8 text), or the FILE.json record written by encode (ids transport)",
    )
    _common(p)


app = paper_cli(
    slug="calgacus",
    model_key="model",  # model=<id or path> sets it (None: reproduce takes no user model)
    title="Calgacus: LLMs can hide text in other text of the same length (ICLR 2026)",
    reproduce="iclr26_calgacus.reproduce:run",
    verbs=[
        Verb(
            "encode",
            "hide a secret text in a cover text of the same token length",
            run="iclr26_calgacus.commands:encode_cmd",
            arguments=_encode_args,
        ),
        Verb(
            "decode",
            "recover the secret from a stegotext with the same model and key",
            run="iclr26_calgacus.commands:decode_cmd",
            arguments=_decode_args,
        ),
    ],
    description="Encode a secret as a plausible cover text of exactly the same token length with any causal LM.",
)
main = app
