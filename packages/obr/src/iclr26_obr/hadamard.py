"""Hadamard matrices and the function-preserving QuaRot-style rotation of a Llama-family model.

``hadamard_matrix(n)``: n = 2^k·m with m ∈ {1, 12, 20, 28} as the Kronecker product of a Sylvester matrix of
order 2^k and a Paley matrix of order m (Paley I from GF(11) and GF(19), Paley II from GF(13)); 40 = 2·20 and
other such orders follow. Any other n raises a clear error — in particular m = 172 (Llama-2-7B's intermediate
size 11008 = 172·64), which QuaRot stores from Sloane's library and this package does not ship.

``hadamard_rotate(model)`` (QuaRot, Ashkboos et al. 2024): fuse each RMSNorm's weight into the linears that read
it, then rotate the residual stream by Q = diag(±1)·H/√d: embeddings E → E·Q, readers (q/k/v, gate/up, lm_head)
W → W·Q, writers (o_proj, down_proj) W → Qᵀ·W. RMSNorm(x·Q) = RMSNorm(x)·Q, so the logits do not change;
outlier channels of the residual stream are spread over all channels, which makes weights and activations
easier to quantise. ``online=True`` also rotates the input of down_proj by a Hadamard of the intermediate size
(W_down → W_down·Hm and a forward pre-hook x → x·Hm), as QuaRot does before quantising that activation.
"""

from __future__ import annotations

import torch
from torch import nn

from iclr26_core.errors import UserError

BASE_ORDERS = (1, 12, 20, 28)
_PALEY = {12: (11, 1), 20: (19, 1), 28: (13, 2)}  # order: (prime q, Paley construction I or II)
ROTATABLE = ("llama", "mistral", "qwen2")


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _sylvester(n: int) -> torch.Tensor:
    H = torch.ones(1, 1, dtype=torch.float64)
    while H.shape[0] < n:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    return H


def _jacobsthal(q: int) -> torch.Tensor:
    """Q_ij = χ(j − i) with χ the quadratic character of GF(q), q prime."""
    squares = {(x * x) % q for x in range(1, q)}
    chi = torch.tensor([0.0] + [1.0 if a in squares else -1.0 for a in range(1, q)], dtype=torch.float64)
    idx = (torch.arange(q).unsqueeze(0) - torch.arange(q).unsqueeze(1)) % q
    return chi[idx]


def _paley(order: int) -> torch.Tensor:
    q, kind = _PALEY[order]
    Q = _jacobsthal(q)
    ones = torch.ones(q, 1, dtype=torch.float64)
    if kind == 1:  # q ≡ 3 (mod 4): S = [[0, 1ᵀ], [−1, Q]] is skew; H = I + S
        S = torch.cat(
            [torch.cat([torch.zeros(1, 1, dtype=torch.float64), ones.t()], 1), torch.cat([-ones, Q], 1)], 0
        )
        return torch.eye(q + 1, dtype=torch.float64) + S
    # q ≡ 1 (mod 4): C = [[0, 1ᵀ], [1, Q]] symmetric conference matrix; H = C⊗[[1,1],[1,−1]] + I⊗[[1,−1],[−1,−1]]
    C = torch.cat(
        [torch.cat([torch.zeros(1, 1, dtype=torch.float64), ones.t()], 1), torch.cat([ones, Q], 1)], 0
    )
    a = torch.tensor([[1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, -1.0], [-1.0, -1.0]], dtype=torch.float64)
    return torch.kron(C, a) + torch.kron(torch.eye(q + 1, dtype=torch.float64), b)


def hadamard_matrix(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A ±1 matrix H of order ``n`` with H·Hᵀ = n·I (not normalised)."""
    for m in sorted(BASE_ORDERS, reverse=True):
        if n % m == 0 and _is_pow2(n // m):
            base = _sylvester(1) if m == 1 else _paley(m)
            return torch.kron(_sylvester(n // m), base).to(dtype)
    raise UserError(
        f"no Hadamard matrix of order {n}: supported are 2^k·m with m in {', '.join(map(str, BASE_ORDERS))} "
        "(order 172, e.g. Llama-2-7B's intermediate 11008 = 172·64, is not shipped)"
    )


def random_hadamard(n: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Orthogonal Q = diag(s)·H/√n with random signs s (QuaRot's randomised Hadamard)."""
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (n,), generator=g).to(torch.float64) * 2 - 1
    return (signs.unsqueeze(1) * hadamard_matrix(n, torch.float64) / n**0.5).to(dtype)


def _llama_parts(model: nn.Module):
    mtype = getattr(getattr(model, "config", None), "model_type", None)
    base = getattr(model, "model", None)
    if mtype not in ROTATABLE or base is None or not hasattr(base, "layers") or not hasattr(model, "lm_head"):
        raise UserError(
            f"hadamard_rotate supports the Llama family ({', '.join(ROTATABLE)}), not {mtype or type(model).__name__}"
        )
    return base


def _fuse_norm(norm: nn.Module, linears: list[nn.Linear]) -> None:
    g = norm.weight.data.double()
    for lin in linears:
        lin.weight.data = (lin.weight.data.double() * g.unsqueeze(0)).to(lin.weight.dtype)
    norm.weight.data.fill_(1.0)


def _right(lin: nn.Module, Q: torch.Tensor) -> None:  # a reader of the residual stream: W → W·Q
    lin.weight.data = (lin.weight.data.double() @ Q).to(lin.weight.dtype)


def _left(lin: nn.Linear, Q: torch.Tensor) -> None:  # a writer to the residual stream: W → Qᵀ·W, b → Qᵀ·b
    lin.weight.data = (Q.t() @ lin.weight.data.double()).to(lin.weight.dtype)
    if lin.bias is not None:
        lin.bias.data = (Q.t() @ lin.bias.data.double()).to(lin.bias.dtype)


def _online_hook(module: nn.Module, args: tuple) -> tuple:
    x = args[0]
    return (x @ module.obr_hadamard.to(x.dtype), *args[1:])


@torch.no_grad()
def hadamard_rotate(model: nn.Module, *, seed: int = 0, online: bool = False) -> nn.Module:
    """Rotate a Llama / Mistral / Qwen2 causal LM in place (logits unchanged up to rounding); returns it."""
    base = _llama_parts(model)
    d = model.config.hidden_size
    Q = random_hadamard(d, seed).to(model.lm_head.weight.device)
    online_h = {}  # every size is checked before anything is modified
    if online:
        for n in {layer.mlp.down_proj.in_features for layer in base.layers}:
            online_h[n] = hadamard_matrix(n, torch.float64).to(Q.device) / n**0.5
    if model.lm_head.weight is base.embed_tokens.weight:  # untie: the final norm is fused into lm_head only
        model.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
        model.config.tie_word_embeddings = False
    for layer in base.layers:
        att, mlp = layer.self_attn, layer.mlp
        _fuse_norm(layer.input_layernorm, [att.q_proj, att.k_proj, att.v_proj])
        _fuse_norm(layer.post_attention_layernorm, [mlp.gate_proj, mlp.up_proj])
        for lin in (att.q_proj, att.k_proj, att.v_proj, mlp.gate_proj, mlp.up_proj):
            _right(lin, Q)
        _left(att.o_proj, Q)
        _left(mlp.down_proj, Q)
        if online:
            Hm = online_h[mlp.down_proj.in_features]
            _right(mlp.down_proj, Hm)
            mlp.down_proj.register_buffer("obr_hadamard", Hm.to(mlp.down_proj.weight.dtype), persistent=False)
            mlp.down_proj.register_forward_pre_hook(_online_hook)
    _fuse_norm(base.norm, [model.lm_head])
    _right(model.lm_head, Q)
    emb = base.embed_tokens.weight
    emb.data = (emb.data.double() @ Q).to(emb.dtype)
    model.obr_rotation = {"kind": "random-hadamard", "seed": seed, "online_down_proj": online}
    return model
