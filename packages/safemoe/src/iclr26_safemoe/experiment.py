"""The miniature's pieces: the aligned toy, one fine-tuning arm (our loop or trl's SFTTrainer) and its evaluation.

Used by `reproduce`; every number a claim or a figure uses comes out of `run_arm` / `evaluate`.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from . import toy
from .finetune import safemoe_finetune
from .routing import RoutingReference, reference_routing, routing_drift


@dataclass
class Setting:
    """One aligned model θ₀ with its held-out prompts, references and the safe prompts D_s."""

    aligned: Any
    align_seconds: float
    ev: dict[str, torch.Tensor]
    refs: dict[str, RoutingReference]
    safe: dict[str, torch.Tensor]
    safe_ref: RoutingReference
    premise_weight: float
    arms: dict[str, list[dict]] = field(default_factory=dict)


def eval_prompts(cfg, seed: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Held-out evaluation prompts (harmful, benign A, benign B) and the N_s safe prompts, never the alignment
    stream (generator 10000 + seed)."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    n = int(cfg.eval.n)
    ev = {
        "harmful": toy.prompts(n, harmful=True, task=None, gen=gen),
        "benign_a": toy.prompts(n, harmful=False, task="A", gen=gen),
        "benign_b": toy.prompts(n, harmful=False, task="B", gen=gen),
    }
    safe = toy.prompt_inputs(toy.prompts(int(cfg.safemoe.n_safe), harmful=True, task=None, gen=gen))
    return ev, safe


def build_setting(cfg, ctx, premise_weight: float) -> Setting:
    """Stage 1 (alignment of θ₀, timed) and the references of the held-out and safe prompts."""
    ev, safe = eval_prompts(cfg, ctx.seed)
    model = toy.tiny_olmoe(seed=ctx.seed).to(ctx.device)
    t0 = time.perf_counter()
    toy.align(
        model,
        steps=int(cfg.align.steps),
        batch_size=int(cfg.align.batch_size),
        lr=float(cfg.align.lr),
        premise_weight=premise_weight,
        seed=ctx.seed,
        progress=ctx.progress,
        benign_b=float(cfg.align.get("benign_b", 0.0)),
    )
    seconds = time.perf_counter() - t0
    refs = {
        "harmful": reference_routing(model, toy.prompt_inputs(ev["harmful"])),
        "benign": reference_routing(model, toy.prompt_inputs(ev["benign_b"])),
    }
    return Setting(model, seconds, ev, refs, safe, reference_routing(model, safe), premise_weight)


def evaluate(model, st: Setting, drift_tau: float) -> dict[str, Any]:
    """Harmfulness, task-B accuracy and the routing drift (τ = ``drift_tau``) of harmful and benign prompts."""
    acc = toy.task_accuracy(model, st.ev["benign_b"])
    dh = routing_drift(model, toy.prompt_inputs(st.ev["harmful"]), st.refs["harmful"], tau=drift_tau)
    db = routing_drift(model, toy.prompt_inputs(st.ev["benign_b"]), st.refs["benign"], tau=drift_tau)
    return {
        "harmfulness": toy.harmfulness(model, st.ev["harmful"]),
        "exact_match": acc["exact_match"],
        "token_accuracy": acc["token_accuracy"],
        "drift_harmful": dh["kl"],
        "drift_benign": db["kl"],
        "drift_harmful_per_layer": dh["kl_per_layer"],
        "drift_benign_per_layer": db["kl_per_layer"],
        "jaccard_harmful": dh["topk_jaccard"],
    }


def attack_data(cfg, seed: int, *, harmful: bool = True, safety: int = 0) -> dict[str, torch.Tensor]:
    """D_ft of one attack seed: task-B rows + harmful→compliant rows (+ refusal rows for the data-mix peer)."""
    g = torch.Generator().manual_seed(20_000 + seed)
    return toy.attack_data(
        int(cfg.attack.n_task), int(cfg.attack.n_harm) if harmful else 0, g, n_safety=safety
    )


def run_arm(
    st: Setting,
    cfg,
    seed: int,
    *,
    defense: bool,
    tau: float,
    data: dict[str, torch.Tensor] | None = None,
    proximal: float = 0.0,
    tau2_scaling: bool = False,
    engine: str = "ours",
    route_grad_clip: float | str | None = "cfg",
    lr: float | None = None,
    epochs: int | None = None,
) -> dict[str, Any]:
    """One LoRA fine-tuning of a copy of θ₀ (``engine`` "ours": `safemoe_finetune`; "trl": trl's SFTTrainer
    with `SafeMoECallback`), evaluated; with its task and defence seconds and the gradient norms (before
    clipping) of the task steps and of the phase-(b) steps. ``route_grad_clip``, ``lr`` and ``epochs``
    override the config's ``safemoe.route_grad_clip``, ``attack.lr`` and ``attack.epochs`` (the C5 arms)."""
    data = attack_data(cfg, seed) if data is None else data
    if route_grad_clip == "cfg":
        route_grad_clip = cfg.safemoe.get("route_grad_clip")
    kw = dict(
        reference=st.safe_ref,
        epochs=int(cfg.attack.epochs if epochs is None else epochs),
        lr=float(cfg.attack.lr if lr is None else lr),
        tau=float(tau),
        batch_size=int(cfg.attack.batch_size),
        defense=defense,
        seed=seed,
        tau2_scaling=tau2_scaling,
    )
    t0 = time.perf_counter()
    if engine == "trl":
        from .trl_arm import trl_finetune

        res = trl_finetune(copy.deepcopy(st.aligned), data, st.safe, toy.tokenizer(), **kw)
    else:
        res = safemoe_finetune(
            copy.deepcopy(st.aligned),
            data,
            st.safe,
            proximal=proximal,
            route_grad_clip=None if route_grad_clip is None else float(route_grad_clip),
            **kw,
        )
    out = evaluate(res.model, st, float(cfg.safemoe.drift_tau))
    out.update(
        seed=seed,
        tau=float(tau),
        tau2_scaling=tau2_scaling,
        proximal=proximal,
        task_seconds=res.task_seconds,
        defense_seconds=res.defense_seconds,
        train_seconds=res.task_seconds + res.defense_seconds,
        train_cpu_seconds=getattr(res, "task_cpu_seconds", 0.0) + getattr(res, "defense_cpu_seconds", 0.0),
        seconds=time.perf_counter() - t0,
        task_loss_last=res.task_losses[-1] if res.task_losses else None,
        lr=kw["lr"],
        epochs=kw["epochs"],
        route_grad_clip=route_grad_clip,
        task_grad_norms=list(getattr(res, "task_grad_norms", [])),
        route_grad_norms=list(getattr(res, "route_grad_norms", [])),
    )
    return out
