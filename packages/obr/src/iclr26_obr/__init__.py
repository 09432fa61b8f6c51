"""iclr26-obr: Optimal Brain Restoration for joint quantisation and sparsification of LLMs — arXiv 2509.11177.

>>> import iclr26_obr as obr
>>> c = obr.obr_compress(weight, hessian, sparsity=0.5, bits=4, quantizer="gptq")   # W4 + 50 % sparse
>>> c.weight, c.mask, c.codes, c.scales
>>> report = obr.apply_to_model(model, calib_batches, method="obr_gptq", rotate=True)

Importing the package does not import torch: the public names below are loaded on first access
(PEP 562 module ``__getattr__``), so ``iclr26-obr --help`` stays fast.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-obr",
    {
        "config": "OBRConfig METHODS",
        "compensation": "group_error_compensation",
        "obr": "obr_compress baseline_compress compress CompressedWeight layer_output_error",
        "gptq": "gptq_quantize",
        "sparsegpt": "sparsegpt_prune",
        "masks": "wanda_mask",
        "quantizer": "find_scales",
        "hadamard": "hadamard_matrix",
        "rotation": "hadamard_rotate",
        "model": "apply_to_model CompressionReport",
        "synthetic": "synthetic_layer",
    },
)
