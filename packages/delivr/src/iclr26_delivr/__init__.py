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

from iclr26_core.lazy import lazy_exports, package_version

__version__ = package_version("iclr26-delivr")

_EXPORTS: dict[str, str] = {
    "DeLiVRConfig": "config",
    "DeLiVR": "model",
    "DeLiVROutput": "model",
    "so3_exp": "lie",
    "so3_log": "lie",
    "so2_matrix": "lie",
    "bounded_rotation": "lie",
    "lie_bias": "bias",
    "LieBias": "bias",
    "base_rays": "bias",
    "lie_velocity": "bias",
    "delivr_loss": "loss",
    "LossWeights": "loss",
    "frame_metrics": "loss",
    "flicker_error": "loss",
    "derain": "derain",
    "blend_weights": "derain",
    "rainy_clips": "data",
    "rainy_sequences": "data",
    "RainClips": "data",
    "train_delivr": "train",
    "TrainSettings": "train",
    "masked_attention_mass": "analysis",
    "convert_official_state_dict": "convert",
    "load_official": "convert",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
