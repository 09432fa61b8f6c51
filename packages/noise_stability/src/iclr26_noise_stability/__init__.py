"""iclr26-noise-stability: noise stability of transformers and the noise-stability regulariser — arXiv 2602.08287.

>>> import iclr26_noise_stability as ns
>>> y = ns.correlated_tokens(input_ids, rho=0.25, vocab_size=V)                  # a ρ-correlated copy
>>> reg = ns.NoiseStabilityRegularizer(gamma=0.75, rho=0.25, S=1)
>>> loss = out.loss + reg(model, input_ids, out.logits)                          # drop-in loss term
>>> ns.noise_stability(model, input_ids, rho=0.5)                                 # normalised Stab_ρ

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-noise-stability")

_EXPORTS: dict[str, str] = {
    "correlated_tokens": "noise",
    "resample_one_token": "noise",
    "noise_eigenvalue": "noise",
    "NoiseStabilityRegularizer": "regularizer",
    "noise_stability": "stability",
    "gaussian_noise_stability": "stability",
    "relu_stability": "stability",
    "relu_fixed_point": "stability",
    "attention_stability": "attention",
    "propagate_interval": "attention",
    "fourier_tail_bounds": "bounds",
    "train_with_regularizer": "training",
    "RunResult": "training",
    "Task": "tasks",
    "modular_addition": "tasks",
    "sparse_parity": "tasks",
    "task_model": "tasks",
    "NoiseStabilityError": "errors",
}

__all__ = [  # noqa: RUF022 - grouped as in the spec
    "__version__",
    "correlated_tokens",
    "resample_one_token",
    "noise_eigenvalue",
    "NoiseStabilityRegularizer",
    "noise_stability",
    "gaussian_noise_stability",
    "relu_stability",
    "relu_fixed_point",
    "attention_stability",
    "propagate_interval",
    "fourier_tail_bounds",
    "train_with_regularizer",
    "RunResult",
    "Task",
    "modular_addition",
    "sparse_parity",
    "task_model",
    "NoiseStabilityError",
]
assert set(__all__) == {"__version__", *_EXPORTS}

if TYPE_CHECKING:  # pragma: no cover
    from .attention import attention_stability, propagate_interval
    from .bounds import fourier_tail_bounds
    from .errors import NoiseStabilityError
    from .noise import correlated_tokens, noise_eigenvalue, resample_one_token
    from .regularizer import NoiseStabilityRegularizer
    from .stability import gaussian_noise_stability, noise_stability, relu_fixed_point, relu_stability
    from .tasks import Task, modular_addition, sparse_parity, task_model
    from .training import RunResult, train_with_regularizer

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
