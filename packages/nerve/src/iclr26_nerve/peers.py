"""Side-by-side with peer libraries (extra ``peers``), on the same model, tokens and checkpoints.

* ``nnsight``: an independent activation capture (``c_fc.output`` / ``c_proj.input``); our metrics must agree
  with metrics computed from its tensors to 1e-5 relative.
* ``transformer-lens``: ``blocks.i.mlp.hook_pre`` / ``hook_post`` of a HookedTransformer built from a tiny config;
  NerVE on its cached tensors vs `analyze` through a registered architecture.
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


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def _pearson(x, y) -> float:
    from .reproduce import _corr

    return _corr(list(x), list(y))


def _spearman(x, y) -> float:
    from .reproduce import _corr, _ranks

    return _corr(_ranks(list(x)), _ranks(list(y)))


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
    worst = 0.0
    for m, (pre, post) in zip(ours.layers, saved, strict=True):
        pre, post = (getattr(t, "value", t) for t in (pre, post))
        theirs = layer_metrics(
            pre.reshape(-1, pre.shape[-1]), post.reshape(-1, post.shape[-1]), dtype=torch.float64
        )
        for key in ("se_pre", "se_post", "pr_pre", "pr_post", "eee_pre", "eee_post", "js"):
            worst = max(
                worst, _rel(getattr(m, key), getattr(theirs, key)) if key != "js" else abs(m.js - theirs.js)
            )
    return {"max_rel_diff": worst, "agrees_1e-5": worst <= 1e-5}


def peer_transformer_lens(n_layer: int, d: int, d_ffn: int, vocab: int, probe: torch.Tensor) -> dict:
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    from .registry import REGISTRY, register_architecture

    cfg = HookedTransformerConfig(
        n_layers=n_layer,
        d_model=d,
        d_head=d // 4,
        n_heads=4,
        d_mlp=d_ffn,
        d_vocab=vocab,
        n_ctx=probe.shape[1],
        act_fn="gelu_new",
        normalization_type="LN",
    )
    tl = HookedTransformer(cfg).eval()
    _, cache = tl.run_with_cache(probe)
    register_architecture("HookedTransformer", blocks="blocks", pre="mlp.hook_pre", post="mlp.hook_post")
    try:
        ours = analyze(tl, {"input": probe}, dtype=torch.float64)
    finally:
        REGISTRY.pop("HookedTransformer", None)
    worst = 0.0
    for i, m in enumerate(ours.layers):
        pre, post = cache[f"blocks.{i}.mlp.hook_pre"], cache[f"blocks.{i}.mlp.hook_post"]
        t = layer_metrics(pre.reshape(-1, d_ffn), post.reshape(-1, d_ffn), dtype=torch.float64)
        worst = max(worst, _rel(m.pr_post, t.pr_post), _rel(m.se_pre, t.se_pre))
    return {"max_rel_diff": worst}


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
        "spearman_lPCA_PR": _spearman(lpca, pr_post),
        "spearman_TwoNN_PR": _spearman(twonn, pr_post),
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
        "r_alpha_loss": _pearson(alphas, losses),
        "r_se_pre_loss": _pearson([se[s] for s in steps], losses),
    }


def run_peers(runs: dict, data: Any, model_cfg: dict, cfg: Any, ctx: Any) -> dict:
    """Run every installed peer; write ``peers.md`` into the run directory; return the numbers."""
    from iclr26_core.fs import atomic_write_text

    from .experiment import ARMS
    from .variants import build_gpt2

    base = next(r for r in runs.values() if r["arm"] == "preln_gelu")
    net = build_gpt2(vocab_size=len(data.tokenizer), seed=base["seed"], **model_cfg, **ARMS["preln_gelu"])
    if base.get("state_dict") is not None:
        net.load_state_dict(base["state_dict"])
    probe = data.probe
    d, d_ffn, n_layer = int(model_cfg["n_embd"]), int(model_cfg["n_inner"]), int(model_cfg["n_layer"])
    jobs = {
        "nnsight": ("nnsight", lambda: peer_nnsight(net, probe)),
        "transformer-lens": (
            "transformer_lens",
            lambda: peer_transformer_lens(n_layer, d, d_ffn, len(data.tokenizer), probe),
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
        ctx.log(f"peer {name}: {out[name]['status']}")
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
            f"PreLN-GELU arm, seed {base['seed']}, probe batch of {probe.numel()} tokens.",
            "",
            "| peer | status | numbers | seconds | seconds per layer |",
            "| --- | --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )
    atomic_write_text(ctx.run_dir / "peers.md", text)
    return out
