"""Raw router logits, the reference routing, the routing-alignment loss and routing drift (SafeMoE §3).

Notation (spec): L MoE layers with E experts; z_l(x, t) = W_l·h_l(x, t) ∈ R^E are the *raw* router logits,
recomputed here as ``F.linear(gate_input, gate.weight)`` from a forward hook on each registered gate;
t* is the last prompt token, always computed from the attention mask.
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from iclr26_core.errors import UserError

from .registry import _base, find_gates


@contextmanager
def capture_router_logits(model: Any):
    """Record the raw router logits of every MoE layer during the forward passes inside the block.

    Yields a list that receives one [N_tokens, E] tensor per MoE layer and forward pass (graph kept, so a
    loss on them backpropagates into whatever produced the gate input, e.g. LoRA on attention).
    """
    gates = find_gates(model)
    store: list[torch.Tensor] = []

    def hook(module, args, _output):
        h = args[0]
        h = h.reshape(-1, h.shape[-1])
        z = F.linear(h, module.weight, getattr(module, "bias", None))
        store.append(z)

    handles = [g.register_forward_hook(hook) for _, g in gates]
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """t* per row: the position of the last 1 of the mask (right padding: sum−1; left padding: T−1). [B]."""
    T = attention_mask.shape[1]
    flipped = attention_mask.flip(1).long().argmax(dim=1)
    return (T - 1 - flipped).long()


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counted over real tokens only, so left padding gives the same logits as none. [B, T]."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def router_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    position: str = "last",
) -> torch.Tensor:
    """Raw router logits: [B, L_moe, E] at t* (``position="last"``) or [B, T, L_moe, E] (``"all"``).

    Gradients flow when called outside ``torch.no_grad()`` (phase (b) of SafeMoE needs them).
    """
    if position not in ("last", "all"):
        raise UserError(f"position must be 'last' or 'all', got {position!r}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    B, T = input_ids.shape
    with capture_router_logits(model) as store:
        model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            use_cache=False,
        )
    z = torch.stack([s.reshape(B, T, -1) for s in store], dim=2)  # [B, T, L, E]
    if position == "all":
        return z
    t = last_token_index(attention_mask).to(z.device)
    return z[torch.arange(B, device=z.device), t]


def routing_alignment_loss(
    current: torch.Tensor, reference: torch.Tensor, tau: float = 0.1, *, tau2_scaling: bool = False
) -> torch.Tensor:
    """L_route = (1/B)·Σ_x Σ_l KL(softmax(r_l(x)/τ) ‖ softmax(z_l(x)/τ)) over [B, L, E] tensors (a scalar).

    ``tau2_scaling=True`` multiplies it by τ² (the distillation scaling of Hinton et al.: the gradient with
    respect to the logits, (q − p)/τ, becomes τ·(q − p), so a small τ no longer inflates it): an ablation, not
    the paper's loss.
    """
    if not tau > 0:
        raise UserError(f"tau must be > 0, got {tau}")
    if current.shape != reference.shape:
        raise UserError(
            f"router logits {tuple(current.shape)} and reference {tuple(reference.shape)} differ in shape"
        )
    log_p = F.log_softmax(reference.detach().float() / tau, dim=-1)
    log_q = F.log_softmax(current.float() / tau, dim=-1)
    loss = F.kl_div(log_q, log_p, log_target=True, reduction="sum") / current.shape[0]
    return loss * tau**2 if tau2_scaling else loss


def logit_spread(logits: torch.Tensor) -> float:
    """σ of router logits: the standard deviation across experts (population, over the last dim), averaged over
    every other index ([N, L, E] → mean over prompts and layers). τ/σ is the dimensionless sharpness of the
    routing-alignment target softmax(r/τ)."""
    return float(logits.float().std(-1, correction=0).mean())


def texts_sha256(texts: list[str]) -> str:
    """A fingerprint of the safe prompts (order matters): SHA-256 of the JSON list of strings."""
    import hashlib

    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()


def router_sha256(model: Any) -> str:
    """A fingerprint of the router weights of every MoE layer (frozen by SafeMoE, so equal before and after)."""
    import hashlib

    h = hashlib.sha256()
    for i, gate in find_gates(model):
        h.update(str(i).encode())
        for t in (gate.weight, getattr(gate, "bias", None)):
            if torch.is_tensor(t):
                # via bf16: the same weights loaded in fp32, bf16 or fp16 give the same fingerprint
                h.update(t.detach().to(torch.bfloat16).float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _signature(model: Any) -> dict[str, Any]:
    base = _base(model)
    gates = find_gates(base)
    cfg = base.config
    return {
        "model_type": cfg.model_type,
        "model_id": str(getattr(cfg, "_name_or_path", "") or ""),
        "layer_ids": [i for i, _ in gates],
        "num_experts": int(gates[0][1].weight.shape[0]),
        "hidden_size": int(gates[0][1].weight.shape[1]),
        "top_k": int(getattr(cfg, "num_experts_per_tok", 2)),
        "router_sha256": router_sha256(base),
    }


@dataclass
class RoutingReference:
    """The aligned model's router logits at t* for the safe prompts: ``logits`` [N, L, E] plus metadata."""

    logits: torch.Tensor
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def sigma(self) -> float:
        """σ of the reference logits across experts (see `logit_spread`)."""
        return logit_spread(self.logits)

    def check_prompts(self, texts: list[str]) -> None:
        """Refuse (one line) safe prompts other than those the reference was extracted from (when recorded)."""
        want = self.meta.get("prompts_sha256")
        if want is not None and texts_sha256(texts) != want:
            raise UserError(
                f"the safe prompts differ from the {self.logits.shape[0]} the reference was extracted from "
                "(SHA-256 mismatch): give the same file, --field and --n as `extract`"
            )

    def check_router(self, model: Any) -> None:
        """Refuse (one line) a model whose router weights differ from the reference model's (when recorded)."""
        want = self.meta.get("router_sha256")
        if want is not None and router_sha256(model) != want:
            src = self.meta.get("model_id") or "another model"
            raise UserError(
                f"reference is from another model: extracted from {src}, whose router weights differ"
            )

    def save(self, path: str | Path) -> Path:
        from safetensors.torch import save_file

        path = Path(path)
        if path.exists():
            raise UserError(f"{path} exists; refusing to overwrite")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        save_file(
            {"logits": self.logits.detach().float().cpu().contiguous()},
            str(tmp),
            metadata={"safemoe": json.dumps(self.meta)},
        )
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> RoutingReference:
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise UserError(f"reference file {path} does not exist")
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = json.loads((f.metadata() or {}).get("safemoe", "{}"))
                logits = f.get_tensor("logits")
        except Exception as exc:  # corrupt or not a safetensors file
            raise UserError(f"{path} is not a SafeMoE routing reference ({type(exc).__name__})") from None
        return cls(logits, meta)

    def check(self, model: Any) -> None:
        """Refuse (one line) a model whose MoE layers, experts or hidden size differ from the reference's."""
        sig = _signature(model)
        for key in ("model_type", "layer_ids", "num_experts", "hidden_size"):
            if key in self.meta and self.meta[key] != sig[key]:
                raise UserError(
                    f"reference is from another model: {key} {self.meta[key]} != {sig[key]} of this model"
                )
        if tuple(self.logits.shape[1:]) != (len(sig["layer_ids"]), sig["num_experts"]):
            raise UserError(
                f"reference is from another model: logits {tuple(self.logits.shape)} vs "
                f"{len(sig['layer_ids'])} MoE layers x {sig['num_experts']} experts"
            )


def _batches(inputs: dict[str, torch.Tensor], batch_size: int):
    ids, mask = inputs["input_ids"], inputs.get("attention_mask")
    if mask is None:
        mask = torch.ones_like(ids)
    for s in range(0, ids.shape[0], batch_size):
        yield slice(s, s + batch_size), ids[s : s + batch_size], mask[s : s + batch_size]


def check_prompts(inputs: dict[str, torch.Tensor]) -> None:
    if inputs is None or "input_ids" not in inputs or inputs["input_ids"].numel() == 0:
        raise UserError("the safe prompts are empty: give at least one harmful instruction")


@torch.no_grad()
def reference_routing(model: Any, inputs: dict[str, torch.Tensor], batch_size: int = 32) -> RoutingReference:
    """Step 1 of SafeMoE: r_l(x) = z_l^{θ₀}(x, t*) for every prompt and MoE layer, eval mode, no grad."""
    check_prompts(inputs)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = [
        router_logits(model, i.to(device), m.to(device)).float().cpu()
        for _, i, m in _batches(inputs, batch_size)
    ]
    model.train(was_training)
    return RoutingReference(torch.cat(out), _signature(model))


@torch.no_grad()
def routing_drift(
    model: Any, inputs: dict[str, torch.Tensor], reference: Any, tau: float = 1.0
) -> dict[str, Any]:
    """Drift of the routing at t* from the reference (our report metric; the paper gives no formula).

    kl = mean over prompts of Σ_l KL(softmax(r_l/τ) ‖ softmax(z_l/τ)); kl_per_layer [L];
    topk_jaccard [L] = mean over prompts of |top-k(r_l) ∩ top-k(z_l)| / |top-k(r_l) ∪ top-k(z_l)|.
    """
    if not tau > 0:
        raise UserError(f"tau must be > 0, got {tau}")
    ref = reference.logits if isinstance(reference, RoutingReference) else reference
    if isinstance(reference, RoutingReference):
        reference.check(model)
    check_prompts(inputs)
    if ref.shape[0] != inputs["input_ids"].shape[0]:
        raise UserError(f"reference has {ref.shape[0]} prompts, got {inputs['input_ids'].shape[0]}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    cur = torch.cat(
        [router_logits(model, i.to(device), m.to(device)).float().cpu() for _, i, m in _batches(inputs, 64)]
    )
    model.train(was_training)
    log_p = F.log_softmax(ref.float() / tau, -1)
    log_q = F.log_softmax(cur / tau, -1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)  # [N, L]
    k = int(_base(model).config.num_experts_per_tok)
    a = F.one_hot(ref.topk(k, -1).indices, ref.shape[-1]).sum(-2).bool()
    b = F.one_hot(cur.topk(k, -1).indices, cur.shape[-1]).sum(-2).bool()
    jac = (a & b).sum(-1).float() / (a | b).sum(-1).float()  # [N, L]
    return {
        "kl": float(kl.sum(-1).mean()),
        "kl_per_layer": kl.mean(0).tolist(),
        "topk_jaccard": jac.mean(0).tolist(),
    }


def warn_truncated(n: int, max_length: int) -> None:
    if n:
        warnings.warn(f"{n} prompt(s) longer than max_length={max_length} were truncated", stacklevel=3)
