"""The routing-alignment temperature in the miniature: keep the paper's dimensionless τ/σ.

τ divides raw router logits, so its effect depends on their spread σ (`logit_spread`: the standard deviation
across experts at t*). The paper's τ = 0.1 acts on OLMoE's logits; the aligned toy's logits spread about five
times more than that model's at initialisation, where τ = 0.1 is a near one-hot target. The miniature therefore
uses τ_mini = τ · σ_mini / σ_ref, with σ_mini measured on the aligned toy's reference and σ_ref the paper's
model's σ.

σ_ref: the trained OLMoE-1B-7B-0125-Instruct cannot be loaded offline, so by default σ_ref is *measured on a
model built from OLMoE-1B-7B's published configuration* (transformers' `OlmoeConfig` defaults: hidden 2048,
64 experts, top-8, initializer_range 0.02), randomly initialised as that configuration prescribes. Every router
reads an RMS-normalised hidden state (unit RMS, norm weights 1 at init), so σ ≈ 0.02·√2048 ≈ 0.9 in every layer
and the router with its input norm suffices. That is the assumption: the instruct model's routers spread their logits about as much
as at initialisation (OLMoE trains with a router z-loss, which penalises large logits). `iclr26-safemoe extract`
prints σ of a real reference; pass it as ``safemoe.sigma_ref=…`` to use the measured value instead.
"""

from __future__ import annotations

import torch

from .routing import logit_spread


@torch.no_grad()
def olmoe_config_sigma(seed: int = 0, n: int = 1024) -> float:
    """σ of OLMoE-1B-7B's router logits at initialisation, from its published configuration.

    Builds the model's own router (`OlmoeTopKRouter`) and the RMSNorm in front of it (`OlmoeRMSNorm`) with the
    configuration's sizes, initialises the router as `OlmoePreTrainedModel._init_weights` does (normal, std
    ``initializer_range``), and feeds ``n`` RMS-normalised random hidden states (what every router reads).
    """
    from transformers import OlmoeConfig
    from transformers.models.olmoe.modeling_olmoe import OlmoeRMSNorm, OlmoeTopKRouter

    cfg = OlmoeConfig()  # hidden_size 2048, num_experts 64, num_experts_per_tok 8, initializer_range 0.02
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        router, norm = OlmoeTopKRouter(cfg), OlmoeRMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        torch.nn.init.normal_(router.weight, mean=0.0, std=cfg.initializer_range)
        logits = router(norm(torch.randn(n, cfg.hidden_size)))[0]
    return logit_spread(logits)


def miniature_tau(tau: float, sigma_mini: float, sigma_ref: float) -> float:
    """τ_mini = τ · σ_mini / σ_ref: the same τ/σ as the paper's model."""
    return float(tau) * float(sigma_mini) / float(sigma_ref)


def paper_tau(cfg, sigma_mini: float) -> dict:
    """The run's τ from ``cfg.safemoe`` (tau, tau_rule relative|raw, sigma_ref null|number) and the measured
    spread ``sigma_mini`` of the reference logits: relative → τ·σ_mini/σ_ref (the paper's τ/σ), raw → τ."""
    from iclr26_core.errors import UserError

    sigma_ref = cfg.safemoe.get("sigma_ref")
    measured = sigma_ref is None
    sigma_ref = olmoe_config_sigma() if measured else float(sigma_ref)
    rule = str(cfg.safemoe.get("tau_rule", "relative"))
    if rule not in ("relative", "raw"):
        raise UserError(f"safemoe.tau_rule must be 'relative' or 'raw', got {rule!r}")
    tau = float(cfg.safemoe.tau)
    tau_mini = miniature_tau(tau, sigma_mini, sigma_ref) if rule == "relative" else tau
    return {
        "tau_paper": tau,
        "sigma_ref": sigma_ref,
        "sigma_ref_source": "OLMoE-1B-7B published config, random init" if measured else "safemoe.sigma_ref",
        "sigma_mini": sigma_mini,
        "rule": rule,
        "tau": tau_mini,
        "tau_over_sigma": tau_mini / sigma_mini,
    }
