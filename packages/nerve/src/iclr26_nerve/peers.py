"""Side-by-side with peer libraries (extra ``peers``), on the same model, tokens and checkpoints.

* ``nnsight``: an independent activation capture (``c_fc.output`` / ``c_proj.input``); our metrics must agree
  with metrics computed from its tensors to 1e-5 relative.
* ``transformer-lens``: the trained GPT-2 loaded into a HookedTransformer (its own forward code); NerVE of its
  ``blocks.i.mlp.hook_pre`` / ``hook_post`` cache vs ours, and `analyze` on the HookedTransformer itself (a
  model without ``config``, through `register_architecture`).
* ``scikit-dimension``: intrinsic dimension (lPCA, TwoNN) of the PostAct matrix (≤ 2000 rows) per layer,
  compared with PR_post by Spearman rank (different estimators: no agreement threshold).
* ``weightwatcher``: power-law α of each ``c_fc`` weight across the training checkpoints; r(α, loss) next to
  r(SE_pre, loss). Layers it cannot read are skipped.

Each peer is probed at run time: not installed → a row saying so, never a failure; an error inside a peer
→ a row with the error.
"""

from __future__ import annotations

import importlib.util
import math
import time
from typing import Any

import numpy as np
import torch

from .analysis import analyze, capture_activations
from .spectrum import layer_metrics
from .stats import pearson, spearman


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def peer_nnsight(model, probe: torch.Tensor) -> dict:
    from nnsight import NNsight

    ours = analyze(model, probe, dtype=torch.float64)
    wrapped = NNsight(model)
    saved = []
    with wrapped.trace(probe):
        for block in wrapped.transformer.h:
            pre = block.mlp.c_fc.output.save()
            post = getattr(block.mlp.c_proj, "input", None)
            post = (post if post is not None else block.mlp.c_proj.inputs[0][0]).save()
            saved.append((pre, post))
    theirs = []
    for pre, post in saved:
        pre, post = (getattr(t, "value", t) for t in (pre, post))
        theirs.append(
            layer_metrics(
                pre.reshape(-1, pre.shape[-1]), post.reshape(-1, post.shape[-1]), dtype=torch.float64
            )
        )
    worst = _worst(ours.layers, theirs)
    return {"max_rel_diff": worst, "agrees_1e-5": worst <= 1e-5}


_KEYS = ("se_pre", "se_post", "pr_pre", "pr_post", "eee_pre", "eee_post", "js")


def _worst(ours: list, theirs: list) -> float:
    """Largest relative difference over the seven metrics (absolute for JS, which can be ≈ 0)."""
    worst = 0.0
    for m, t in zip(ours, theirs, strict=True):
        for key in _KEYS:
            a, b = getattr(m, key), getattr(t, key)
            worst = max(worst, abs(a - b) if key == "js" else _rel(a, b))
    return worst


def peer_transformer_lens(model, probe: torch.Tensor) -> dict:
    """The same trained GPT-2 as a transformer-lens ``HookedTransformer`` (its own forward code): NerVE from
    its ``hook_pre`` / ``hook_post`` cache against ours on the HF model, and `analyze` run on the
    HookedTransformer itself (no ``config``: registered under its class name)."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

    from .registry import REGISTRY, register_architecture

    c = model.config
    cfg = HookedTransformerConfig(
        n_layers=c.n_layer,
        d_model=c.n_embd,
        d_head=c.n_embd // c.n_head,
        n_heads=c.n_head,
        d_mlp=c.n_inner or 4 * c.n_embd,
        d_vocab=c.vocab_size,
        n_ctx=c.n_positions,
        act_fn=c.activation_function,
        normalization_type="LN",
        eps=c.layer_norm_epsilon,
    )
    tl = HookedTransformer(cfg)
    tl.load_and_process_state_dict(
        convert_gpt2_weights(model, cfg),
        fold_ln=False,
        center_writing_weights=False,
        center_unembed=False,
        fold_value_biases=False,
    )
    tl.eval()
    with torch.no_grad():
        logits, cache = tl.run_with_cache(probe)
        ref = model(probe).logits
    theirs = []
    for i in range(c.n_layer):
        pre, post = cache[f"blocks.{i}.mlp.hook_pre"], cache[f"blocks.{i}.mlp.hook_post"]
        theirs.append(
            layer_metrics(
                pre.reshape(-1, pre.shape[-1]), post.reshape(-1, post.shape[-1]), dtype=torch.float64
            )
        )
    ours = analyze(model, probe, dtype=torch.float64)
    register_architecture("HookedTransformer", blocks="blocks", pre="mlp.hook_pre", post="mlp.hook_post")
    try:
        on_tl = analyze(tl, {"input": probe}, dtype=torch.float64)
    finally:
        REGISTRY.pop("HookedTransformer", None)
    worst, worst_tl = _worst(ours.layers, theirs), _worst(on_tl.layers, theirs)
    return {
        "max_abs_logit_diff": float((logits - ref).abs().max()),
        "max_rel_diff": worst,
        "analyze_on_hooked_transformer_max_rel_diff": worst_tl,
        "agrees_1e-4": max(worst, worst_tl) <= 1e-4,
    }


def peer_skdim(model, probe: torch.Tensor, pr_post: list[float]) -> dict:
    import skdim

    acts = capture_activations(model, probe)
    lpca, twonn = [], []
    for i in sorted(acts):
        x = acts[i][1].double().numpy()[:2000]
        lpca.append(float(skdim.id.lPCA().fit(x).dimension_))
        twonn.append(float(skdim.id.TwoNN().fit(x).dimension_))
    return {
        "lPCA": lpca,
        "TwoNN": twonn,
        "PR_post": pr_post,
        "spearman_lPCA_PR": spearman(lpca, pr_post),
        "spearman_TwoNN_PR": spearman(twonn, pr_post),
    }


def peer_weightwatcher(snapshots: list[tuple[int, dict]], traj: list[dict]) -> dict:
    import weightwatcher as ww

    loss = {p["step"]: p["eval_loss"] for p in traj}
    se = {p["step"]: float(np.mean([m["se_pre"] for m in p["layers"]])) for p in traj}
    steps, alphas = [], []
    for step, state in snapshots:
        # the c_fc weights as plain nn.Linear layers (weightwatcher does not read GPT-2's Conv1D)
        keys = sorted(k for k in state if k.endswith("mlp.c_fc.weight"))
        net = torch.nn.Sequential(*[torch.nn.Linear(*state[k].shape, bias=False) for k in keys])
        with torch.no_grad():
            for lin, k in zip(net, keys, strict=True):
                lin.weight.copy_(state[k].T)
        details = ww.WeightWatcher(model=net).analyze()
        a = [float(v) for v in details["alpha"] if math.isfinite(float(v))]
        if a and math.isfinite(loss.get(step, float("nan"))):
            steps.append(step)
            alphas.append(float(np.mean(a)))
    losses = [loss[s] for s in steps]
    return {
        "steps": steps,
        "alpha": alphas,
        "r_alpha_loss": pearson(alphas, losses),
        "r_se_pre_loss": pearson([se[s] for s in steps], losses),
    }


def run_peers(runs: dict, data: Any, model_cfg: dict, cfg: Any, ctx: Any) -> dict:
    """Run every installed peer; write ``peers.md`` into the run directory; return the numbers."""
    from iclr26_core.fs import atomic_write_text

    from .experiment import ARMS
    from .variants import build_gpt2

    def trained(arm: str):
        """(the arm's first-seed run or None, its model: trained when its state was kept, else at init)."""
        run = next((r for r in runs.values() if r["arm"] == arm and r.get("state_dict") is not None), None)
        seed = run["seed"] if run else int(cfg.seed)
        model = build_gpt2(vocab_size=len(data.tokenizer), seed=seed, **model_cfg, **ARMS[arm])
        if run is not None:
            model.load_state_dict(run["state_dict"])
        return run, model.eval()

    base, net = trained("preln_gelu")
    if base is None:
        base = next(r for r in runs.values() if r["arm"] == "preln_gelu")
    # transformer-lens has no official NerVE block (its PreLN residual adds LN₁(x)): it checks the stock arm
    stock_run, stock = trained("preln_gelu_stock")
    stock_note = (
        f"the trained stock-GPT-2 arm (seed {stock_run['seed']})"
        if stock_run
        else "a stock GPT-2 at init (the preln_gelu_stock arm was not run)"
    )
    probe = data.probe
    n_layer = int(model_cfg["n_layer"])
    jobs = {
        "nnsight": ("nnsight", lambda: peer_nnsight(net, probe)),
        "transformer-lens": (
            "transformer_lens",
            lambda: {"model": stock_note, **peer_transformer_lens(stock, probe)},
        ),
        "scikit-dimension": (
            "skdim",
            lambda: peer_skdim(net, probe, [m["pr_post"] for m in base.get("final", [])]),
        ),
        "weightwatcher": (
            "weightwatcher",
            lambda: peer_weightwatcher(base.get("snapshots", []), base["trajectory"]),
        ),
    }
    out, rows = {}, []
    for name, (module, fn) in jobs.items():
        if not _installed(module):
            ctx.peers_missing([name])
            out[name] = {"status": "not installed (pip install 'iclr26-nerve[peers]')"}
        else:
            t0 = time.perf_counter()
            try:
                out[name] = {"status": "ok", **fn()}
            except Exception as exc:  # a peer's failure is reported, not raised
                out[name] = {
                    "status": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                }
            out[name]["seconds"] = round(time.perf_counter() - t0, 2)
            ctx.log(f"peer {name}: {out[name]['status']}")  # missing ones: the one "peers not installed" line
        nums = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in out[name].items()
            if k not in ("status", "seconds") and not isinstance(v, list)
        )
        secs = out[name].get("seconds")
        per_layer = f"{secs / n_layer:.2f}" if secs is not None else ""
        rows.append(
            f"| {name} | {out[name]['status']} | {nums} | {secs if secs is not None else ''} | {per_layer} |"
        )
    text = "\n".join(
        [
            "# NerVE peers",
            "",
            f"PreLN-GELU arm (official block), seed {base['seed']}, probe batch of {probe.numel()} tokens; "
            f"transformer-lens on {stock_note}.",
            "",
            "| peer | status | numbers | seconds | seconds per layer |",
            "| --- | --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )
    atomic_write_text(ctx.run_dir / "peers.md", text)
    return out
