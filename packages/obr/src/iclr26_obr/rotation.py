"""Function-preserving QuaRot-style rotation of a Llama-family causal LM (the W4A4KV4 path of the paper).

As the official code (``QuaRot/rotation_utils.py``, ``main.py``) runs it, with d the hidden size, hd the head
size, H_n a Hadamard matrix of order n (`hadamard.hadamard_matrix`) normalised by √n:

Offline (weights only; with ``online=False`` the result is a plain ``transformers`` model):

1. fuse each RMSNorm's weight into the linears that read it (the norms become weightless);
2. rotate the residual stream by Q = diag(±1)·H_d: embeddings E → E·Q, readers (q/k/v or the fused qkv_proj,
   gate/up or the fused gate_up_proj, lm_head) W → W·Q, writers (o_proj, down_proj) W → Qᵀ·W (and bias);
3. V/O: each head's values are rotated by H_hd: v_proj's rows of every kv head (and its bias) W_v → (I⊗H_hd)ᵀ·W_v,
   o_proj W_o → W_o·(I⊗H_hd). Attention mixes value rows within a head, so the two cancel.

Online (``online=True``; forward pre-hooks, not saved with the model):

4. down_proj: x → x·H_I (I the intermediate size), W_down → W_down·H_I;
5. o_proj: x → x·C with C = (I⊗H_hd)ᵀ·H_{heads·hd}, W_o → W_o·C, so o_proj reads x·H_{heads·hd}, fully mixed
   (QuaRot folds H into W_o and applies the cross-head Hadamard online; C is that cross-head factor);
6. K after RoPE with a per-head Hadamard: the attention wrapper of `actquant.add_kv_quant` (scores unchanged).

Every Hadamard size is checked before anything is modified (orders: `hadamard.BASE_ORDERS`).
"""

from __future__ import annotations

import torch
from torch import nn

from iclr26_core.errors import UserError

from .hadamard import hadamard_matrix, has_hadamard, random_hadamard

FAMILIES = ("llama", "mistral", "qwen2", "phi3")


def _base(model: nn.Module) -> nn.Module:
    mtype = getattr(getattr(model, "config", None), "model_type", None)
    base = getattr(model, "model", None)
    if mtype not in FAMILIES or base is None or not hasattr(base, "layers") or not hasattr(model, "lm_head"):
        raise UserError(
            f"hadamard_rotate supports the Llama family ({', '.join(FAMILIES)}), not {mtype or type(model).__name__}"
        )
    return base


def head_dims(config) -> tuple[int, int, int]:
    """(attention heads, key/value heads, head size) of a Llama-family config."""
    heads = int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    hd = getattr(config, "head_dim", None) or config.hidden_size // heads
    return heads, kv, int(hd)


def attention_readers(att: nn.Module) -> list[nn.Linear]:
    return [att.qkv_proj] if hasattr(att, "qkv_proj") else [att.q_proj, att.k_proj, att.v_proj]


def mlp_readers(mlp: nn.Module) -> list[nn.Linear]:
    return [mlp.gate_up_proj] if hasattr(mlp, "gate_up_proj") else [mlp.gate_proj, mlp.up_proj]


def orthonormal_hadamard(n: int) -> torch.Tensor:
    return hadamard_matrix(n, torch.float64) / n**0.5


def _fuse_norm(norm: nn.Module, linears: list[nn.Linear]) -> None:
    g = norm.weight.data.double()
    for lin in linears:
        lin.weight.data = (lin.weight.data.double() * g.unsqueeze(0)).to(lin.weight.dtype)
    norm.weight.data.fill_(1.0)


def _right(lin: nn.Module, Q: torch.Tensor) -> None:  # reads the rotated basis: W → W·Q
    lin.weight.data = (lin.weight.data.double() @ Q.to(lin.weight.device)).to(lin.weight.dtype)


def _left(lin: nn.Linear, Q: torch.Tensor) -> None:  # writes the rotated basis: W → Qᵀ·W, b → Qᵀ·b
    Q = Q.to(lin.weight.device)
    lin.weight.data = (Q.t() @ lin.weight.data.double()).to(lin.weight.dtype)
    if lin.bias is not None:
        lin.bias.data = (Q.t() @ lin.bias.data.double()).to(lin.bias.dtype)


def _rotate_value_rows(lin: nn.Linear, start: int, kv: int, Hh: torch.Tensor) -> None:
    """Rows ``start:`` of ``lin`` are kv heads of size hd: each head's rows (and bias) → H_hdᵀ·rows."""
    hd = Hh.shape[0]
    Hh = Hh.to(lin.weight.device)
    rows = lin.weight.data[start:].double().reshape(kv, hd, -1)
    lin.weight.data[start:] = torch.einsum("ij,hid->hjd", Hh, rows).reshape(kv * hd, -1).to(lin.weight.dtype)
    if lin.bias is not None:
        b = lin.bias.data[start:].double().reshape(kv, hd)
        lin.bias.data[start:] = (b @ Hh).reshape(-1).to(lin.bias.dtype)


def _rotate_output_heads(lin: nn.Linear, heads: int, Hh: torch.Tensor) -> None:
    """o_proj's input columns, head by head: W_o → W_o·(I⊗H_hd)."""
    hd = Hh.shape[0]
    W = lin.weight.data.double().reshape(lin.out_features, heads, hd)
    lin.weight.data = (W @ Hh.to(W.device)).reshape(lin.out_features, heads * hd).to(lin.weight.dtype)


def _online_hook(module: nn.Module, args: tuple) -> tuple:
    x = args[0]
    return (x @ module.obr_hadamard.to(x.dtype), *args[1:])


def _online(lin: nn.Linear, M: torch.Tensor, M_cast: torch.Tensor) -> None:
    """W → W·M (float64) and the input x → x·M at run time (``M_cast``: M in the weights' dtype, shared)."""
    _right(lin, M)
    lin.register_buffer("obr_hadamard", M_cast, persistent=False)
    lin.register_forward_pre_hook(_online_hook)


def check_rotatable(model: nn.Module, online: bool) -> None:
    """Every Hadamard order the rotation needs exists (a `UserError` naming the first that does not)."""
    base = _base(model)
    heads, _, hd = head_dims(model.config)
    need = [("hidden size", model.config.hidden_size), ("head size", hd)]
    if online:
        need.append(("attention width (heads x head size)", heads * hd))
        need += [("intermediate size", n) for n in {layer.mlp.down_proj.in_features for layer in base.layers}]
    for what, n in need:
        if not has_hadamard(n):
            hadamard_matrix(n)  # raises the clear error
            raise UserError(f"no Hadamard matrix for the {what} {n}")  # pragma: no cover


@torch.no_grad()
def hadamard_rotate(model: nn.Module, *, seed: int = 0, online: bool = False) -> nn.Module:
    """Rotate a Llama / Mistral / Qwen2 / Phi-3 causal LM in place (logits unchanged up to rounding); returns it.

    ``online=True`` adds the online Hadamards of down_proj's and o_proj's inputs (steps 4-5 of the module doc).
    """
    check_rotatable(model, online)
    base = _base(model)
    heads, kv, hd = head_dims(model.config)
    dev = model.lm_head.weight.device
    Q = random_hadamard(model.config.hidden_size, seed).to(dev)
    Hh = orthonormal_hadamard(hd).to(dev)
    wdtype = model.lm_head.weight.dtype
    shared: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # key -> (float64, weights' dtype)
    if online:
        C = torch.kron(torch.eye(heads, dtype=torch.float64), Hh.cpu()).t() @ orthonormal_hadamard(heads * hd)
        sizes = {layer.mlp.down_proj.in_features for layer in base.layers}
        for key, M in [(-1, C)] + [(n, orthonormal_hadamard(n)) for n in sizes]:
            shared[key] = (M.to(dev), M.to(device=dev, dtype=wdtype))
    if model.lm_head.weight is base.embed_tokens.weight:  # untie: the final norm is fused into lm_head only
        model.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
        model.config.tie_word_embeddings = False
    for layer in base.layers:
        att, mlp = layer.self_attn, layer.mlp
        _fuse_norm(layer.input_layernorm, attention_readers(att))
        _fuse_norm(layer.post_attention_layernorm, mlp_readers(mlp))
        for lin in attention_readers(att) + mlp_readers(mlp):
            _right(lin, Q)
        _left(att.o_proj, Q)
        _left(mlp.down_proj, Q)
        if hasattr(att, "qkv_proj"):
            _rotate_value_rows(att.qkv_proj, (heads + kv) * hd, kv, Hh)
        else:
            _rotate_value_rows(att.v_proj, 0, kv, Hh)
        _rotate_output_heads(att.o_proj, heads, Hh)
        if online:
            _online(mlp.down_proj, *shared[mlp.down_proj.in_features])
            _online(att.o_proj, *shared[-1])
    _fuse_norm(base.norm, [model.lm_head])
    _right(model.lm_head, Q)
    emb = base.embed_tokens.weight
    emb.data = (emb.data.double() @ Q.to(emb.device)).to(emb.dtype)
    model.obr_rotation = {"kind": "random-hadamard", "seed": seed, "online": online, "value_output": True}
    return model
