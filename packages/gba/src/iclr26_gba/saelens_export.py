"""Export a trained tied GBA SAE in SAELens's on-disk format (``cfg.json`` + ``sae_weights.safetensors``).

Our SAE works on rescaled inputs x_s = s·x (s = ``input_scale``):

    y = (s·x − b_pre) Wᵀ + b,   z = ReLU(y),   x̂ = ((z ⊙ a) W + b_pre) / s

SAELens's "standard" SAE computes z = ReLU((x − b_dec) W_enc + b_enc), x̂ = z W_dec + b_dec, so the same
function is

    W_enc = s·Wᵀ [d, M],   b_enc = b,   W_dec = (a ⊙ W) / s [M, d],   b_dec = b_pre / s.

For ``activation="jumprelu"`` (z = u·1[u + b > 0], u = (s·x − b_pre)Wᵀ) SAELens's "jumprelu" SAE with
b_enc = 0 and threshold = −b (≥ 0, since b ∈ [−1, 0]) is the same function. No sae-lens import is needed to
write the files; ``sae_lens.SAE.load_from_disk(dir)`` reads them (checked in the tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .errors import GBAError

SAELENS_WEIGHTS = "sae_weights.safetensors"
SAELENS_CONFIG = "cfg.json"
SAELENS_FORMAT_VERSION = "6.0.0"  # the cfg.json layout of SAELens >= 6 (metadata block, "architecture")


def hook_name_for_layer(layer: int) -> str:
    """TransformerLens's name for ``hidden_states[layer]``: 0 → blocks.0.hook_resid_pre, L → blocks.{L−1}.hook_resid_post."""
    layer = int(layer)
    return "blocks.0.hook_resid_pre" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"


def saelens_tensors(sae) -> tuple[str, dict[str, torch.Tensor]]:
    """(architecture, state dict) of SAELens's SAE equal to our tied ``sae``."""
    if getattr(sae, "kind", None) != "tied":
        raise GBAError("only tied GBA/BA SAEs are exported to SAELens (TopK/L1 baselines are ours only)")
    with torch.no_grad():
        s = float(sae.input_scale)
        w = sae.W.detach().float().cpu()
        out = {
            "W_enc": (w.T * s).contiguous(),
            "W_dec": (sae.a.detach().float().cpu()[:, None] * w / s).contiguous(),
            "b_dec": (sae.b_pre.detach().float().cpu() / s).contiguous(),
        }
        b = sae.b.detach().float().cpu()
    if sae.activation == "relu":
        return "standard", {**out, "b_enc": b.clone()}
    return "jumprelu", {**out, "b_enc": torch.zeros_like(b), "threshold": (-b).clamp_min(0.0)}


def export_saelens(sae, directory: str | Path, **metadata: Any) -> Path:
    """Write ``sae`` as a SAELens SAE into the new (or empty) ``directory`` (atomic: staged, then renamed).

    ``metadata`` (model_name, hook_name, context_size, dataset_path, ...) goes into cfg.json's
    ``metadata`` block, which SAELens uses to hook the SAE into a model.
    """
    from safetensors.torch import save_file

    from iclr26_core.fs import staged_dir, write_json

    arch, tensors = saelens_tensors(sae)
    cfg = {
        "d_in": int(sae.d),
        "d_sae": int(sae.n_neurons),
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "reshape_activations": "none",
        "architecture": arch,
        "metadata": {
            "sae_lens_version": SAELENS_FORMAT_VERSION,
            "sae_lens_training_version": None,
            "hook_head_index": None,
            "prepend_bos": False,
            "model_from_pretrained_kwargs": {},
            **metadata,
            "exported_by": "iclr26-gba",
            "gba": {k: v for k, v in sae.meta.items() if _plain(v)},
        },
    }
    with staged_dir(directory) as tmp:
        save_file(tensors, str(tmp / SAELENS_WEIGHTS))
        write_json(tmp / SAELENS_CONFIG, cfg)
    return Path(directory)


def _plain(v: Any) -> bool:
    return isinstance(v, str | int | float | bool | dict | list) or v is None
