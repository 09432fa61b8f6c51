"""iclr26-delivr: DeLiVR — video deraining with differential spatiotemporal Lie-group attention biases
(arXiv 2509.21719, ICLR 2026).

>>> import iclr26_delivr as dl
>>> model = dl.DeLiVR(dl.DeLiVRConfig(embed_dim=32, depth=2, heads=2))
>>> out = model(frames)                       # frames [B, T, 3, H, W] in [0, 1], T odd
>>> out.restored, out.theta, out.velocity     # centre frame [B, 3, H, W], angles [B, T], Lie velocity [B, T-1]
>>> video = dl.derain(model, rainy_video, tile=256, overlap=32)

Importing the package does not import torch: public names load on first access (PEP 562).
"""

from __future__ import annotations

from iclr26_core.lazy import lazy_package

# submodule -> the public names it defines, loaded on first access
__version__, __all__, __getattr__, __dir__ = lazy_package(
    __name__,
    "iclr26-delivr",
    {
        "config": "DeLiVRConfig",
        "model": "DeLiVR DeLiVROutput",
        "lie": "so3_exp so3_log so2_matrix bounded_rotation",
        "bias": "lie_bias LieBias base_rays lie_velocity",
        "loss": "delivr_loss LossWeights frame_metrics flicker_error",
        "derain": "derain blend_weights",
        "data": "rainy_clips rainy_sequences RainClips",
        "train": "train_delivr TrainSettings",
        "analysis": "masked_attention_mass",
        "convert": "convert_official_state_dict load_official",
    },
)
