"""The official NerVE GPT-2 block, written from the official code's structure (``nerve/models/gpt2.py``,
``myGPT2Block`` / ``myGPT2Attention`` / ``myGPT2MLP``, swapped into a ``GPT2LMHeadModel`` by
``convertGPT2model``, which keeps ``wte``, ``wpe`` and the final ``ln_f``). It is what the paper's GPT-2
results were trained with (``scripts/run_clm.py`` converts every model, PreLN included). Differences from
stock GPT-2's ``GPT2Block``:

* **PreLN residual.** The attention sublayer's residual adds the *normalised* input:
  h = LN₁(x); x ← h + attn(h); x ← x + mlp(LN₂ x). (Stock GPT-2: x ← x + attn(LN₁ x).) PostLN is the same
  as stock: x ← LN₁(x + attn(x)); x ← LN₂(x + mlp(x)). NormFree (the official ``norm_type="free"``):
  LN₁ = LN₂ = identity, so x ← x + attn(x); x ← x + mlp(x).
* **No biases** except on the fused query/key projection: ``attn.qk_attn`` (Conv1D d → 2d, bias),
  ``attn.v_attn``, ``attn.c_proj``, ``mlp.c_fc`` and ``mlp.c_proj`` carry a frozen zero bias (the official
  ``MyConv1D(bias=False)``).
* **Init.** Every projection ~ N(0, 0.02²), *without* GPT-2's 1/√(2·n_layer) scaling of ``c_proj``
  (the blocks are built after ``GPT2LMHeadModel.post_init``); LayerNorms at (1, 0).
* **No dropout** inside the block; only GPT-2's embedding dropout (``embd_pdrop``) remains.
* **Activation** ``config.activation_function``; the official default is ``"gelu"`` (exact, erf), not
  stock GPT-2's ``"gelu_new"`` (tanh approximation).

Module names follow GPT-2 (``ln_1``, ``attn``, ``ln_2``, ``mlp.c_fc``, ``mlp.act``, ``mlp.c_proj``), so the
registry's gpt2 hook points (``mlp.c_fc`` output, ``mlp.c_proj`` input) apply unchanged. The attention is
causal scaled dot-product attention (the official ``_attn`` with its causal mask and additive padding mask);
there is no KV cache (``config.use_cache`` is set to False).
"""

from __future__ import annotations

import torch
from torch import nn

BLOCK_POSITIONS = ("pre", "post", "free")


def _conv1d(nf: int, nx: int, bias: bool, std: float = 0.02) -> nn.Module:
    """transformers' Conv1D (weight [nx, nf]) ~ N(0, std²); ``bias=False`` → a frozen zero bias, as the
    official ``MyConv1D(bias=False)``."""
    from transformers.pytorch_utils import Conv1D

    layer = Conv1D(nf, nx)
    with torch.no_grad():
        layer.weight.normal_(0.0, std)
        layer.bias.zero_()
    if not bias:
        layer.bias.requires_grad_(False)
    return layer


class NerVEAttention(nn.Module):
    """Causal multi-head attention with a biased fused q/k projection and bias-free v and output."""

    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.n_head = config.num_attention_heads
        if d % self.n_head:
            raise ValueError(f"n_embd {d} is not divisible by n_head {self.n_head}")
        self.qk_attn = _conv1d(2 * d, d, bias=True, std=config.initializer_range)
        self.v_attn = _conv1d(d, d, bias=False, std=config.initializer_range)
        self.c_proj = _conv1d(d, d, bias=False, std=config.initializer_range)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k = self.qk_attn(x).split(d, dim=2)
        v = self.v_attn(x)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        if mask is None:
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # transformers' 4-D mask (causal and padding): bool = attend, float = additive
            y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[..., :t, :t])
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))


class NerVEMLP(nn.Module):
    """x → c_proj(act(c_fc(x))), bias-free."""

    def __init__(self, config, inner: int):
        from transformers.activations import ACT2FN

        super().__init__()
        d = config.hidden_size
        self.c_fc = _conv1d(inner, d, bias=False, std=config.initializer_range)
        self.act = ACT2FN[config.activation_function]
        self.c_proj = _conv1d(d, inner, bias=False, std=config.initializer_range)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


def _returns_tensor() -> bool:
    """transformers ≥ 5 expects a GPT-2 block to return the hidden states, 4.x a tuple."""
    import transformers

    return int(transformers.__version__.split(".")[0]) >= 5


class NerVEBlock(nn.Module):
    """One official NerVE block; ``position`` is ``"pre"``, ``"post"`` or ``"free"`` (see the module doc)."""

    def __init__(self, config, position: str = "pre"):
        super().__init__()
        if position not in BLOCK_POSITIONS:
            raise ValueError(f"position must be one of {BLOCK_POSITIONS}, got {position!r}")
        d = config.hidden_size
        self.position = position
        if position == "free":
            self.ln_1, self.ln_2 = nn.Identity(), nn.Identity()
        else:
            self.ln_1 = nn.LayerNorm(d, eps=config.layer_norm_epsilon)
            self.ln_2 = nn.LayerNorm(d, eps=config.layer_norm_epsilon)
        self.attn = NerVEAttention(config)
        self.mlp = NerVEMLP(config, config.n_inner or 4 * d)
        self._tensor_out = _returns_tensor()

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        # GPT2Model passes its 4-D causal/padding mask positionally (its index differs across versions)
        mask = kwargs.get("attention_mask")
        if mask is None:
            mask = next((a for a in args if isinstance(a, torch.Tensor) and a.dim() == 4), None)
        x = hidden_states
        if self.position == "post":
            x = self.ln_1(x + self.attn(x, mask))
            x = self.ln_2(x + self.mlp(x))
        else:  # "pre" (the official PreLN: the residual adds LN₁(x)) and "free" (LNs are identities)
            h = self.ln_1(x)
            x = h + self.attn(h, mask)
            x = x + self.mlp(self.ln_2(x))
        return x if self._tensor_out else (x,)
