"""iclr26-atpt: A-TPT — angular diversity for calibrated test-time prompt tuning of CLIP-style models
(ICLR 2026, arXiv 2510.26441).

The public API is re-exported lazily: ``import iclr26_atpt`` does not import torch.
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-atpt",
    {
        "objectives": "angular_diversity atfd orthogonality tpt_loss select_confident regularizer_loss "
        "min_pairwise_angle simplex_angle",
        "prompt": "PromptLearner",
        "openclip": "OpenClipPromptLearner",
        "openclip_port": "hf_to_open_clip",
        "tuner": "TestTimePromptTuner TTAPrediction",
        "sphere": "sphere_experiment SphereResult",
        "calibration": "ece20 fit_temperature reliability_figure",
        "digits": "digit_splits train_toy_clip make_views prompt_tokenizer",
        "validate": "AtptError",
    },
)
