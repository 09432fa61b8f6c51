"""iclr26-obr: Optimal Brain Restoration for joint quantisation and sparsification of LLMs — arXiv 2509.11177.

>>> import iclr26_obr as obr
>>> c = obr.obr_compress(weight, hessian, sparsity=0.5, bits=4, quantizer="gptq")   # W4 + 50 % sparse
>>> c.weight, c.mask, c.codes, c.scales
>>> report = obr.apply_to_model(model, calib_batches, method="obr_gptq", rotate=True)

Importing the package does not import torch: the public names below are loaded on first access
(PEP 562 module ``__getattr__``), so ``iclr26-obr --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-obr")

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "OBRConfig": "config",
    "METHODS": "config",
    "group_error_compensation": "compensation",
    "obr_compress": "obr",
    "baseline_compress": "obr",
    "compress": "obr",
    "CompressedWeight": "obr",
    "layer_output_error": "obr",
    "gptq_quantize": "gptq",
    "sparsegpt_prune": "sparsegpt",
    "wanda_mask": "masks",
    "find_scales": "quantizer",
    "hadamard_matrix": "hadamard",
    "hadamard_rotate": "hadamard",
    "apply_to_model": "model",
    "CompressionReport": "model",
    "synthetic_layer": "synthetic",
}

__all__ = [  # noqa: RUF022 - grouped as in the spec
    "__version__",
    "OBRConfig",
    "METHODS",
    "group_error_compensation",
    "obr_compress",
    "baseline_compress",
    "compress",
    "CompressedWeight",
    "layer_output_error",
    "gptq_quantize",
    "sparsegpt_prune",
    "wanda_mask",
    "find_scales",
    "hadamard_matrix",
    "hadamard_rotate",
    "apply_to_model",
    "CompressionReport",
    "synthetic_layer",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .compensation import group_error_compensation
    from .config import METHODS, OBRConfig
    from .gptq import gptq_quantize
    from .hadamard import hadamard_matrix, hadamard_rotate
    from .masks import wanda_mask
    from .model import CompressionReport, apply_to_model
    from .obr import CompressedWeight, baseline_compress, compress, layer_output_error, obr_compress
    from .quantizer import find_scales
    from .sparsegpt import sparsegpt_prune
    from .synthetic import synthetic_layer

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
