"""``reproduce scale=real``: NerVE on a real pretrained LLM (SmolLM2-135M-Instruct, 30 SwiGLU FFNs) on
held-out real text, beside a randomly initialised model of the same shape (the control).

SmolLM2 is a Llama: ``mlp(x) = down_proj(silu(gate_proj(x)) ⊙ up_proj(x))``. As the official analyser
(``nerve/analyzer.py``, its "llama" entry: ``up="mlp.gate_proj"``, ``down="mlp.down_proj"``, gated) and
the official gated block (``myGPT2MLP``: PreAct = ``c_fc`` = the gate), PreAct is the gate branch
W_gate·x ∈ R^D (D = 1536) and PostAct is silu(W_gate·x) ⊙ (W_up·x), the input of ``down_proj``.

Claims, with their rules fixed before the run (the official demo notebook's reading of a pretrained
GPT-2: "SE↑, PR gain > 1 in most layers, ΔEEE < 0"; "JS highest in early layers"):

* C1 reinjection (the miniature's C1): SE_post > SE_pre, PR_post > PR_pre and EEE_post < EEE_pre in ≥ ⌈¾·L⌉ of the L layers.
* C5 early redistribution: the mean JS of the first third of the layers exceeds that of the rest.

The control runs the same rules on the random model; they are reported in the notes, without a verdict.
A capture check recomputes layer 0's PreAct/PostAct by hand from the MLP's input.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from iclr26_core.report import Claim, Results

from .analysis import analyze, capture_activations
from .claims import _reinjecting


def _signs(layers: list[dict]) -> dict:
    return {
        "se": sum(m["se_diff"] > 0 for m in layers),
        "pr": sum(m["pr_gain"] > 1 for m in layers),
        "eee": sum(m["eee_diff"] < 0 for m in layers),
        "all": _reinjecting(layers),
    }


def _early_late_js(layers: list[dict]) -> tuple[float, float]:
    k = max(1, len(layers) // 3)
    return float(np.mean([m["js"] for m in layers[:k]])), float(np.mean([m["js"] for m in layers[k:]]))


def capture_check(model, ids: torch.Tensor) -> float:
    """Max |difference| between the captured layer-0 PreAct/PostAct and gate_proj(x), silu(gate)·up(x)
    recomputed from the MLP's input x."""
    mlp = model.model.layers[0].mlp
    seen: dict = {}
    handle = mlp.register_forward_pre_hook(lambda m, a: seen.setdefault("x", a[0].detach()))
    try:
        acts = capture_activations(model, ids, layers=[0])
    finally:
        handle.remove()
    with torch.no_grad():
        x = seen["x"].reshape(-1, seen["x"].shape[-1])
        pre = mlp.gate_proj(x)
        post = mlp.act_fn(pre) * mlp.up_proj(x)
    return float(max((acts[0][0] - pre).abs().max(), (acts[0][1] - post).abs().max()))


def _control(model, seed: int):
    """A randomly initialised model of the same class and config (same shapes)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = type(model)(model.config)
    return net.to(dtype=next(model.parameters()).dtype).eval()


def claim_c1_real(trained: list[dict], control: list[dict], d_model: int, n_tokens: int) -> Claim:
    n = len(trained)
    need = math.ceil(0.75 * n)
    s, c = _signs(trained), _signs(control)
    fails = [m["layer"] for m in trained if not _reinjecting([m])]
    above_d = sum(m["pr_post"] > d_model for m in trained)
    return Claim(
        "C1",
        "FFN nonlinearity reinjects variance (SE↑, PR↑, EEE↓ pre → post) in a pretrained LLM",
        "qualitative (most layers)",
        f"SE {s['se']}/{n}, PR {s['pr']}/{n}, EEE {s['eee']}/{n}, all {s['all']}/{n}",
        s["all"] >= need,
        f"≥ {need} of {n} layers have SE_post > SE_pre, PR_post > PR_pre and EEE_post < EEE_pre "
        f"(SmolLM2-135M, {n_tokens} held-out tokens)",
        f"layers not meeting all three: {fails or 'none'}; random control (same shape): SE {c['se']}/{n}, "
        f"PR {c['pr']}/{n}, EEE {c['eee']}/{n}, all {c['all']}/{n}; median PR gain trained "
        f"{np.median([m['pr_gain'] for m in trained]):.2f} vs control "
        f"{np.median([m['pr_gain'] for m in control]):.2f}; rank bound PR_pre ≤ d = {d_model}, PR_post > d "
        f"in {above_d}/{n} layers",
    )


def claim_c5_real(trained: list[dict], control: list[dict]) -> Claim:
    early, late = _early_late_js(trained)
    c_early, c_late = _early_late_js(control)
    k = max(1, len(trained) // 3)
    peak = int(np.argmax([m["js"] for m in trained]))
    return Claim(
        "C5",
        "the pre → post redistribution (JS) is strongest in early layers",
        "qualitative (the official demo notebook)",
        {f"JS layers 0–{k - 1}": early, f"JS layers {k}–{len(trained) - 1}": late},
        early > late,
        f"mean JS of layers 0–{k - 1} > mean JS of layers {k}–{len(trained) - 1}",
        f"JS peaks at layer {peak} ({trained[peak]['js']:.4f}); random control: early {c_early:.4f} vs "
        f"late {c_late:.4f}",
    )


def run_real(cfg: Any, ctx: Any) -> Results:
    """The scale=real study (see the module docstring)."""
    from iclr26_core.corpus import token_blocks
    from iclr26_core.pretrained import load_smollm2, real_text

    from .plots import plot_metrics_by_layer, plot_spectra_dict

    r = cfg.real
    t0 = time.perf_counter()
    model, tok = load_smollm2(dtype=torch.float32)
    ctx.log(f"loaded SmolLM2-135M-Instruct in {time.perf_counter() - t0:.0f} s")
    blocks = token_blocks(real_text(str(r.split)), tok, int(r.seq_len))
    rows = int(r.tokens) // int(r.seq_len)
    if len(blocks) < rows:
        ctx.log(f"the {r.split!r} text gives {len(blocks)} rows of {r.seq_len} tokens; using all of them")
    blocks = blocks[:rows]
    batches = [blocks[i : i + int(r.batch_size)] for i in range(0, len(blocks), int(r.batch_size))]
    check = capture_check(model, blocks[:1])
    ctx.log(f"capture check (layer 0, by hand): max |diff| = {check:.1e}")
    reports, seconds = {}, {}
    for name, net in (("trained", model), ("control", None)):
        net = net if net is not None else _control(model, int(cfg.seed))
        t = time.perf_counter()
        reports[name] = analyze(net, batches, layers_per_pass=r.get("layers_per_pass"))
        seconds[name] = time.perf_counter() - t
        ctx.log(f"{name}: {len(reports[name].layers)} layers in {seconds[name]:.0f} s")
        del net
    trained = [m.to_dict() for m in reports["trained"].layers]
    control = [m.to_dict() for m in reports["control"].layers]
    d_model = int(trained[0]["d_model"])
    n_tokens = int(trained[0]["n_tokens"])
    claims = [claim_c1_real(trained, control, d_model, n_tokens), claim_c5_real(trained, control)]
    figures = []
    if cfg.get("figures", True):
        figures.append(
            plot_metrics_by_layer(
                {"SmolLM2-135M": trained, "random control": control}, ctx.run_dir / "metrics_by_layer.png"
            )
        )
        n = len(trained)
        pick = sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})
        for name, rep in reports.items():
            figures.append(
                plot_spectra_dict(
                    {str(i): rep.eigenvalues[i] for i in pick if i in rep.eigenvalues},
                    ctx.run_dir / f"spectra_{name}.png",
                    f"SmolLM2-135M {name}: pre (gate) vs post (silu(gate)·up), layers {pick}",
                )
            )
    metrics = {
        "setup": {
            "model": "SmolLM2-135M-Instruct (dequantised Q4_1 GGUF) and a random model of the same shape",
            "pre": "mlp.gate_proj output (W_gate·x)",
            "post": "mlp.down_proj input (silu(W_gate·x) ⊙ W_up·x)",
            "text": f"iclr26_core.pretrained.real_text({r.split!r})",
            "n_tokens": n_tokens,
            "seq_len": int(r.seq_len),
            "d_model": d_model,
            "d_ffn": int(trained[0]["d_ffn"]),
        },
        "capture_check_max_abs_diff": check,
        "seconds": seconds,
        "trained": trained,
        "control": control,
    }
    return Results(claims=claims, metrics=metrics, figures=figures)
