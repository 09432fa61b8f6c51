"""GPT-2 variants of the paper's architecture study: block, normalisation placement, activation, FFN width.

``block``:

* ``"official"`` (default): the official NerVE block (`iclr26_nerve.blocks`, the paper's
  ``convertGPT2model``): bias-free projections except q/k, unscaled N(0, 0.02²) init, no dropout inside
  the block, and in PreLN the attention residual adds LN₁(x). The model is a `NerVEGPT2LMHeadModel` (a
  ``GPT2LMHeadModel`` whose blocks are `NerVEBlock`s); ``from_pretrained`` on that class restores it.
* ``"stock"``: ``transformers``' own ``GPT2Block`` (the package's 0.1–0.2 builder), kept as an arm.

``norm_position`` (paper §3.4, "normalization strategies"):

* ``"pre"``   PreLN (official: x ← LN₁x + attn(LN₁x); stock GPT-2: x ← x + attn(LN₁x)); x ← x + mlp(LN₂x)
* ``"post"``  PostLN: x ← LN₁(x + attn(x)); x ← LN₂(x + mlp(x))
* ``"mixed"`` MixLN: PostLN in the first ``post_ln_layers`` blocks, PreLN in the rest
* ``"free"``  NormFree: ``ln_1`` and ``ln_2`` are identities; the final ``ln_f`` is kept, as the official
  ``convertGPT2model`` keeps ``transformer.ln_f`` (the official ``norm_type="free"``)

``activation`` is GPT-2's ``activation_function`` ("gelu" as the official config, "gelu_new" as stock
GPT-2, "relu", "silu" ...); ``mlp_width_mult`` sets ``n_inner = mult · n_embd``. The model's config records
the variant (``nerve_block``, ``nerve_norm_position``, ``nerve_post_ln_layers``); `load_gpt2_variant`
rebuilds it from a saved folder, and `apply_variant` re-applies a stock variant after
``GPT2LMHeadModel.from_pretrained``, which would otherwise rebuild a PreLN model.

The stock PostLN is applied with forward hooks: ``ln_1``/``ln_2`` pass their input through, and
``attn``/``mlp`` return LN(x + f(x)) − x, so that the block's own residual add yields LN(x + f(x)). This
keeps GPT-2's module names and state-dict keys and works across `transformers` versions.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from .errors import NerVEError

NORM_POSITIONS = ("pre", "post", "mixed", "free")
BLOCKS = ("official", "stock")


def _block_positions(pos: str, n_layer: int, n_post: int) -> list[str]:
    if pos not in NORM_POSITIONS:
        raise NerVEError(f"norm_position must be one of {', '.join(NORM_POSITIONS)}, got {pos!r}")
    if pos == "mixed":
        if not 0 <= n_post <= n_layer:
            raise NerVEError(f"post_ln_layers must be in 0..{n_layer}, got {n_post}")
        return ["post" if i < n_post else "pre" for i in range(n_layer)]
    return [pos] * n_layer


@functools.lru_cache(maxsize=1)
def _gpt2_lm_class():
    from transformers import GPT2LMHeadModel

    class NerVEGPT2LMHeadModel(GPT2LMHeadModel):
        """``GPT2LMHeadModel`` with the official NerVE blocks (`iclr26_nerve.blocks.NerVEBlock`), laid out by
        ``config.nerve_norm_position`` / ``nerve_post_ln_layers``; ``wte``, ``wpe`` and ``ln_f`` are GPT-2's."""

        def __init__(self, config):
            from .blocks import NerVEBlock

            super().__init__(config)
            positions = _block_positions(
                getattr(config, "nerve_norm_position", "pre"),
                config.n_layer,
                int(getattr(config, "nerve_post_ln_layers", 0) or 0),
            )
            self.transformer.h = nn.ModuleList(NerVEBlock(config, p) for p in positions)

    return NerVEGPT2LMHeadModel


def NerVEGPT2LMHeadModel(config):  # a factory: the class imports transformers lazily
    """A `GPT2LMHeadModel` subclass with the official blocks; see `_gpt2_lm_class`."""
    return _gpt2_lm_class()(config)


def build_gpt2(
    *,
    vocab_size: int,
    n_layer: int = 4,
    n_embd: int = 64,
    n_head: int = 4,
    n_inner: int | None = None,
    mlp_width_mult: float | None = None,
    n_positions: int = 64,
    activation: str = "gelu",
    norm_position: str = "pre",
    post_ln_layers: int = 0,
    block: str = "official",
    embd_pdrop: float = 0.0,
    dropout: float = 0.0,
    seed: int = 0,
    **overrides: Any,
):
    """A randomly initialised GPT-2 variant (see the module docstring). ``embd_pdrop``: GPT-2's embedding
    dropout (the official runs inherit 0.1 from the ``gpt2`` config); ``dropout``: attention and residual
    dropout of the *stock* block (the official block has none)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.activations import ACT2FN

    if activation not in ACT2FN:
        raise NerVEError(f"unknown activation {activation!r}; choose one of {', '.join(sorted(ACT2FN))}")
    if block not in BLOCKS:
        raise NerVEError(f"block must be one of {', '.join(BLOCKS)}, got {block!r}")
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
        embd_pdrop=embd_pdrop,
        attn_pdrop=dropout,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
        **overrides,
    )
    config.nerve_block = block
    config.nerve_norm_position = norm_position
    config.nerve_post_ln_layers = int(post_ln_layers)
    _block_positions(norm_position, n_layer, int(post_ln_layers))  # validate before building
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if block == "official":
            config.use_cache = False  # the official block keeps no KV cache
            model = NerVEGPT2LMHeadModel(config)
        else:
            model = GPT2LMHeadModel(config)
    return apply_variant(model)


def load_gpt2_variant(path):
    """A saved `build_gpt2` model with its variant, or None when ``path`` holds no official-block model
    (then load it as usual and call `apply_variant`)."""
    import json
    from pathlib import Path

    cfg_file = Path(path).expanduser() / "config.json"
    if not cfg_file.is_file():
        return None
    try:
        block = json.loads(cfg_file.read_text()).get("nerve_block")
    except (OSError, ValueError):
        return None
    if block != "official":
        return None
    return _gpt2_lm_class().from_pretrained(str(Path(path).expanduser())).eval()


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
    if getattr(cfg, "nerve_block", "stock") == "official":
        if type(model).__name__ != "NerVEGPT2LMHeadModel":
            raise NerVEError(
                "this model was built with the official NerVE blocks; load it with "
                "iclr26_nerve.load_gpt2_variant(path), not GPT2LMHeadModel.from_pretrained"
            )
        return model  # the official blocks carry their variant themselves
    if getattr(model, "_nerve_variant_applied", False) or pos == "pre":
        return model
    if cfg.model_type != "gpt2":
        raise NerVEError(f"norm_position={pos!r} is implemented for GPT-2 only, not {cfg.model_type!r}")
    blocks = model.transformer.h
    if pos == "free":
        for block in blocks:  # ln_f stays, as in the official convertGPT2model
            block.ln_1, block.ln_2 = nn.Identity(), nn.Identity()
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
