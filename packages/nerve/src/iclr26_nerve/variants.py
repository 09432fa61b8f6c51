"""GPT-2 variants of the paper's architecture study: normalisation placement, activation, FFN width.

``norm_position`` (paper §5, "normalization strategies"):

* ``"pre"``   stock GPT-2 (PreLN): x ← x + attn(LN₁ x); x ← x + mlp(LN₂ x)
* ``"post"``  PostLN: x ← LN₁(x + attn(x)); x ← LN₂(x + mlp(x))
* ``"mixed"`` MixLN: PostLN in the first ``post_ln_layers`` blocks, PreLN in the rest
* ``"free"``  NormFree: ``ln_1``, ``ln_2`` and ``ln_f`` replaced by ``nn.Identity``

``activation`` is GPT-2's ``activation_function`` ("gelu_new" as stock, "relu", "gelu", "silu" ...);
``mlp_width_mult`` sets ``n_inner = mult · n_embd``. The result is still a ``GPT2LMHeadModel`` (so
`analyze` works on it) whose config records the variant (``nerve_norm_position``, ``nerve_post_ln_layers``):
`apply_variant` re-applies it after ``from_pretrained``, which would otherwise rebuild a PreLN model.

PostLN is applied with forward hooks: ``ln_1``/``ln_2`` pass their input through, and ``attn``/``mlp``
return LN(x + f(x)) − x, so that the block's own residual add yields LN(x + f(x)). This keeps GPT-2's
module names and state-dict keys and works across `transformers` versions.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .errors import NerVEError

NORM_POSITIONS = ("pre", "post", "mixed", "free")


def build_gpt2(
    *,
    vocab_size: int,
    n_layer: int = 4,
    n_embd: int = 64,
    n_head: int = 4,
    n_inner: int | None = None,
    mlp_width_mult: float | None = None,
    n_positions: int = 64,
    activation: str = "gelu_new",
    norm_position: str = "pre",
    post_ln_layers: int = 0,
    dropout: float = 0.0,
    seed: int = 0,
    **overrides: Any,
):
    """A randomly initialised GPT2LMHeadModel variant (see the module docstring)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.activations import ACT2FN

    if activation not in ACT2FN:
        raise NerVEError(f"unknown activation {activation!r}; choose one of {', '.join(sorted(ACT2FN))}")
    if mlp_width_mult is not None:
        n_inner = round(mlp_width_mult * n_embd)
    config = GPT2Config(
        vocab_size=vocab_size,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_inner=n_inner,
        n_positions=n_positions,
        activation_function=activation,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
        **overrides,
    )
    config.nerve_norm_position = norm_position
    config.nerve_post_ln_layers = int(post_ln_layers)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    return apply_variant(model)


def _identity(module, args, output):
    return args[0]


def _post_ln(ln: nn.LayerNorm):
    def hook(module, args, kwargs, output):
        x = args[0] if args else kwargs["hidden_states"]
        out = output[0] if isinstance(output, tuple) else output
        new = nn.functional.layer_norm(x + out, ln.normalized_shape, ln.weight, ln.bias, ln.eps) - x
        return (new, *output[1:]) if isinstance(output, tuple) else new

    return hook


def apply_variant(model):
    """Re-apply the variant recorded in ``model.config`` (``nerve_norm_position``); idempotent."""
    cfg = model.config
    pos = getattr(cfg, "nerve_norm_position", "pre")
    n_post = int(getattr(cfg, "nerve_post_ln_layers", 0) or 0)
    if pos not in NORM_POSITIONS:
        raise NerVEError(f"norm_position must be one of {', '.join(NORM_POSITIONS)}, got {pos!r}")
    if getattr(model, "_nerve_variant_applied", False) or pos == "pre":
        return model
    if cfg.model_type != "gpt2":
        raise NerVEError(f"norm_position={pos!r} is implemented for GPT-2 only, not {cfg.model_type!r}")
    tr = model.transformer
    blocks = tr.h
    if pos == "free":
        for block in blocks:
            block.ln_1, block.ln_2 = nn.Identity(), nn.Identity()
        tr.ln_f = nn.Identity()
    else:
        if pos == "mixed" and not 0 <= n_post <= len(blocks):
            raise NerVEError(f"post_ln_layers must be in 0..{len(blocks)}, got {n_post}")
        n = len(blocks) if pos == "post" else n_post
        for block in list(blocks)[:n]:
            # ln_1/ln_2 keep their parameters (same state-dict keys) but act as identities before the
            # sublayers; they are applied after the residual add instead
            block.ln_1.register_forward_hook(_identity)
            block.ln_2.register_forward_hook(_identity)
            block.attn.register_forward_hook(_post_ln(block.ln_1), with_kwargs=True)
            block.mlp.register_forward_hook(_post_ln(block.ln_2), with_kwargs=True)
    model._nerve_variant_applied = True
    return model


def set_activation(model, act: nn.Module) -> list[nn.Module]:
    """Swap every GPT-2 FFN activation for ``act``; returns the old ones (for `restore_activation`)."""
    old = [block.mlp.act for block in model.transformer.h]
    for block in model.transformer.h:
        block.mlp.act = act
    return old


def restore_activation(model, old: list[nn.Module]) -> None:
    for block, act in zip(model.transformer.h, old, strict=True):
        block.mlp.act = act
