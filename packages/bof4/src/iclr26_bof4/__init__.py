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

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-bof4",
    {
        "config": "BOF4Config CODEBOOK_NAMES",
        "codebooks": "codebook",
        "derive": "derive_codebook LloydConvergenceWarning",
        "quantizer": "quantize dequantize quantization_error Quantized",
        "layer": "BOF4Linear",
        "model": "apply_to_model QuantReport",
        "checkpoint": "save_packed load_packed save_pretrained from_pretrained",
        "lora": "lora_config load_lora LoraBOF4Linear",
    },
)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only (names re-exported above)
    from .checkpoint import from_pretrained, load_packed, save_packed, save_pretrained  # noqa: F401
    from .codebooks import codebook  # noqa: F401
    from .config import CODEBOOK_NAMES, BOF4Config  # noqa: F401
    from .derive import LloydConvergenceWarning, derive_codebook  # noqa: F401
    from .layer import BOF4Linear  # noqa: F401
    from .lora import LoraBOF4Linear, load_lora, lora_config  # noqa: F401
    from .model import QuantReport, apply_to_model  # noqa: F401
    from .quantizer import Quantized, dequantize, quantization_error, quantize  # noqa: F401
