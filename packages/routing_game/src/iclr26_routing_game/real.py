"""The game on a real LM: SmolLM2-135M-Instruct (strong, M2) and the same model with layers dropped (weak, M1).

Both sample next words of real held-out English (`iclr26_core.pretrained.real_text("test")`, Python's own
documentation) at temperature T with independent retries (`tasks.cloze_tasks`, `solvers.HFSampler`). The weak
model is SmolLM2 with the decoder layers ``drop`` removed (a genuinely smaller, faster model: fewer FLOPs and
fewer seconds per token, measured). Caveats: SmolLM2's weights come from a Q4_1 GGUF (the "full" model is the
dequantised Q4_1 one) and it is the instruct model, prompted here with raw text.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from iclr26_core.errors import UserError


def drop_layers(model: Any, drop: Sequence[int]) -> Any:
    """A copy of a Llama-style causal LM without the decoder layers ``drop`` (indices into model.layers)."""
    import torch

    n = len(model.model.layers)
    bad = [i for i in drop if not 0 <= int(i) < n]
    if bad or len(set(drop)) >= n:
        raise UserError(f"drop must name distinct layers in [0, {n}) and keep at least one, got {list(drop)}")
    keep = [i for i in range(n) if i not in {int(i) for i in drop}]
    small = copy.deepcopy(model)
    small.model.layers = torch.nn.ModuleList([small.model.layers[i] for i in keep])
    for j, layer in enumerate(small.model.layers):
        layer.self_attn.layer_idx = j  # the KV cache is indexed by position in the stack
    small.config.num_hidden_layers = len(keep)
    if getattr(small.config, "layer_types", None):
        small.config.layer_types = [small.config.layer_types[i] for i in keep]
    return small.eval()


def smollm2_pair(drop: Sequence[int], temperature: float, max_prompt_tokens: int = 64) -> list[Any]:
    """[weak, strong] sampling solvers: SmolLM2-135M-Instruct without layers ``drop``, and SmolLM2 itself."""
    import torch

    from iclr26_core.pretrained import load_smollm2

    from .solvers import HFSampler

    model, tok = load_smollm2(dtype=torch.float32)
    weak = drop_layers(model, drop)
    name = f"SmolLM2-135M minus {len(drop)} layers ({min(drop)}-{max(drop)})" if drop else "SmolLM2-135M"
    return [
        HFSampler(weak, tok, name, temperature, max_prompt_tokens),
        HFSampler(model, tok, "SmolLM2-135M-Instruct", temperature, max_prompt_tokens),
    ]


def real_tasks(n: int, seed: int, split: str = "test") -> list[dict[str, Any]]:
    """``n`` next-word tasks from the held-out split of `real_text`."""
    from iclr26_core.pretrained import real_text

    from .tasks import cloze_tasks

    return cloze_tasks(real_text(split), n, seed)


def real_table(est: dict[str, Any]) -> list[str]:
    """The "On a real model" table (markdown): each model's measured parameters, then the solved game."""
    ci = lambda x, f=".3g": f"[{x[0]:{f}}, {x[1]:{f}}]"  # noqa: E731
    lvl = f"{est['level']:.0%}"
    lines = [
        f"| model | passes | p ({lvl} CI) | p after a failure ({lvl} CI) | tasks never / always solved | "
        "tokens per pass (prompt + new) | CPU ms per token (prefill, decode) | t = s per pass (CI) | c = GFLOPs (CI) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k, m in enumerate(est["models"], 1):
        tok, sec = m["tokens_per_pass"], m["seconds_per_token"]
        lines.append(
            f"| M{k} {m['name']} | {m['passes']} | {m['p']:.3f} {ci(m['p_ci'], '.3f')} | {m['p_after_failure']:.3f} "
            f"{ci(m['p_after_failure_ci'], '.3f')} | {m['share_tasks_never_solved']:.0%} / "
            f"{m['share_tasks_always_solved']:.0%} | {tok['prompt']:.1f} + {tok['new']:.2f} | "
            f"{1e3 * sec['prefill']:.2f}, {1e3 * sec['decode']:.2f} | {m['t']:.3g} {ci(m['t_ci'])} | "
            f"{m['c']:.3g} {ci(m['c_ci'])} |"
        )
    sol, iv = est["solution"], est["intervals"]
    eq, th, g = sol["equilibrium"], sol["throttling"], sol["game"]
    shares = ", ".join(f"{k} {v:.0%}" for k, v in iv["policy_shares"].items())
    lines += [
        "",
        f"| the game (V = {g['V']:g}, P = {g['P']:g}) | point estimate | {lvl} interval over {est['n_boot']} "
        "bootstrap games |",
        "| --- | --- | --- |",
        f"| regime (ξ1, ξ2) | {sol['regime']} ({sol['thresholds']['xi'][0]:.3g}, {sol['thresholds']['xi'][1]:.3g}) | "
        + ", ".join(f"{k} {v:.0%}" for k, v in iv["regime_shares"].items())
        + " |",
        f"| provider's route | {est['policy']} (M{eq['i']}, s = {eq['s']:.3g}) | {shares} |",
        f"| user's best response q* | {eq['q']:.3g} | {ci(iv['q_ci'])} |",
        f"| provider cost J | {eq['provider_cost']:.4g} | {ci(iv['provider_cost_ci'], '.4g')} |",
        f"| user utility U | {eq['user_utility']:.4g} | {ci(iv['user_utility_ci'], '.4g')} |",
        f"| misalignment gap Δ_U | {sol['misalignment_gap']:.4g} | {ci(iv['gap_ci'], '.4g')} |",
        f"| throttling gain ({th['subset']}) | {th['gain']:.4g} | {ci(iv['throttle_gain_ci'], '.4g')} |",
    ]
    return lines
