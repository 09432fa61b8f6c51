"""The package imports without torch; the public API resolves lazily."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import iclr26_bof4

SRC = str(Path(iclr26_bof4.__file__).resolve().parents[1])


def test_import_does_not_import_torch():
    code = (
        "import sys, iclr26_bof4, iclr26_bof4.config; from iclr26_bof4 import BOF4Config, CODEBOOK_NAMES; "
        "assert 'torch' not in sys.modules, 'torch imported'; print(iclr26_bof4.__version__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_public_api():
    for name in (
        "codebook",
        "derive_codebook",
        "quantize",
        "dequantize",
        "quantization_error",
        "apply_to_model",
        "Quantized",
        "QuantReport",
        "BOF4Linear",
        "BOF4Config",
        "CODEBOOK_NAMES",
        "__version__",
    ):
        assert name in iclr26_bof4.__all__
        assert getattr(iclr26_bof4, name) is not None
    assert iclr26_bof4.CODEBOOK_NAMES == ("nf4", "af4", "bof4-mse", "bof4-mae", "bof4s-mse", "bof4s-mae")
