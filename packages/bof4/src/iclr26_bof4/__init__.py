"""iclr26-bof4: block-wise optimal 4-bit float quantisation (BOF4, BOF4-S, OPQ) — arXiv 2505.06653.

>>> import iclr26_bof4 as bof4
>>> q = bof4.quantize(weight, codebook="bof4s-mse", block_size=64, opq_q=0.95)
>>> w_hat = q.dequantize()
>>> report = bof4.apply_to_model(model, mode="packed")
>>> bof4.save_pretrained(model, "./llama-bof4", tokenizer=tok); model = bof4.from_pretrained("./llama-bof4")

Importing the package does not import torch: the public names below are loaded on first access
(PEP 562 module ``__getattr__``), so ``iclr26-bof4 --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-bof4")

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "BOF4Config": "config",
    "CODEBOOK_NAMES": "config",
    "codebook": "codebooks",
    "derive_codebook": "lloyd",
    "quantize": "quantizer",
    "dequantize": "quantizer",
    "quantization_error": "quantizer",
    "Quantized": "quantizer",
    "BOF4Linear": "layer",
    "apply_to_model": "model",
    "QuantReport": "model",
    "save_packed": "checkpoint",
    "load_packed": "checkpoint",
    "save_pretrained": "checkpoint",
    "from_pretrained": "checkpoint",
    "lora_config": "lora",
    "load_lora": "lora",
    "LoraBOF4Linear": "lora",
    "LloydConvergenceWarning": "lloyd",
}

__all__ = [  # noqa: RUF022 - grouped as in the spec
    "__version__",
    "BOF4Config",
    "CODEBOOK_NAMES",
    "codebook",
    "derive_codebook",
    "quantize",
    "dequantize",
    "quantization_error",
    "Quantized",
    "BOF4Linear",
    "apply_to_model",
    "QuantReport",
    "save_packed",
    "load_packed",
    "save_pretrained",
    "from_pretrained",
    "lora_config",
    "load_lora",
    "LoraBOF4Linear",
    "LloydConvergenceWarning",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .checkpoint import from_pretrained, load_packed, save_packed, save_pretrained
    from .codebooks import codebook
    from .config import CODEBOOK_NAMES, BOF4Config
    from .layer import BOF4Linear
    from .lloyd import LloydConvergenceWarning, derive_codebook
    from .lora import LoraBOF4Linear, load_lora, lora_config
    from .model import QuantReport, apply_to_model
    from .quantizer import Quantized, dequantize, quantization_error, quantize

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
