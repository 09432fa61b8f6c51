"""iclr26-noise-stability: noise stability of transformers and the noise-stability regulariser — arXiv 2602.08287.

>>> import iclr26_noise_stability as ns
>>> y = ns.correlated_tokens(input_ids, rho=0.25, vocab_size=V)                  # a ρ-correlated copy
>>> reg = ns.NoiseStabilityRegularizer(gamma=0.75, rho=0.25, S=1)
>>> loss = out.loss + reg(model, input_ids, out.logits)                          # drop-in loss term
>>> ns.noise_stability(model, input_ids, rho=0.5)                                 # normalised Stab_ρ

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-noise-stability",
    {
        "noise": "correlated_tokens resample_one_token noise_eigenvalue",
        "regularizer": "NoiseStabilityRegularizer",
        "stability": "noise_stability noise_stability_stats gaussian_noise_stability relu_stability relu_fixed_point",
        "attention": "attention_stability propagate_interval",
        "bounds": "fourier_tail_bounds",
        "training": "train_with_regularizer RunResult",
        "tasks": "Task modular_addition sparse_parity task_model BitMLP",
        "errors": "NoiseStabilityError",
    },
)
