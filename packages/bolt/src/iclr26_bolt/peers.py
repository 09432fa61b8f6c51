"""Side by side with peer libraries on the same inputs (``reproduce bench=true``):

* lm-eval — ``HFLM.loglikelihood`` on the same (context, continuation) pairs with the same tiny GPT-2: the
  summed log-likelihoods must match `OptionScorer` to 1e-4; lm-eval's acc / acc_norm next to ours
  (``normalize="none"`` / ``"char"``).
* netcal — ECE with 15 bins and temperature scaling, next to ours.
A peer that is not installed is one line (the core's ``ctx.peers_missing``).
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import numpy as np

from .calibration import fit_temperature
from .experiment import SeedData, gold, raw_scores, softmax
from .metrics import decision_metrics

PEERS = {"lm_eval": "lm-eval", "netcal": "netcal"}


def missing_peers() -> list[str]:
    return [dist for mod, dist in PEERS.items() if importlib.util.find_spec(mod) is None]


def lm_eval_check(data: SeedData, n_items: int = 60) -> dict[str, Any]:
    """Our option scores vs lm-eval's HFLM.loglikelihood on the pass-1 test prompts of the ODD student."""
    import logging

    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    model, tok = data.models["odd"], data.tokenizer
    items = data.test[:n_items]
    encs = data.enc["test/low"][:n_items]
    ours = raw_scores(model, encs, data.pad_id)
    from .world import context

    requests, k = [], len(items[0]["options"])
    for i, it in enumerate(items):
        user = data.scorer.template.user_text(it["question"], it["options"], context(data.world, it, "low"))
        for j, opt in enumerate(it["options"]):
            prompt, joint = data.scorer.template.render(tok, user, opt)
            args = (prompt, joint[len(prompt) :])
            requests.append(Instance("loglikelihood", {}, args, i * k + j))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = HFLM(pretrained=model, tokenizer=tok, batch_size=32, device="cpu")
        res = lm.loglikelihood(requests, disable_tqdm=True)
    theirs = np.array([r[0] for r in res]).reshape(len(items), k)
    y = gold(items)
    chars = np.array([[len(r.args[1]) for r in requests[i * k : (i + 1) * k]] for i in range(len(items))])
    return {
        "n_pairs": len(requests),
        "max_abs_diff": float(np.abs(theirs - ours).max()),
        "match_1e-4": bool(np.abs(theirs - ours).max() <= 1e-4),
        "acc_lm_eval": float((theirs.argmax(1) == y).mean()),
        "acc_ours": float((ours.argmax(1) == y).mean()),
        "acc_norm_lm_eval": float(((theirs / chars).argmax(1) == y).mean()),
        "acc_norm_ours_char": float(((ours / chars).argmax(1) == y).mean()),
    }


def netcal_check(data: SeedData) -> dict[str, Any]:
    """ECE-15 and temperature scaling of the ODD student's pass-1 probabilities: ours vs netcal."""
    from netcal.metrics import ECE
    from netcal.scaling import TemperatureScaling

    model = data.models["odd"]
    s_val = raw_scores(model, data.enc["val/low"], data.pad_id)
    s_test = raw_scores(model, data.enc["test/low"], data.pad_id)
    y_val, y_test = gold(data.val), gold(data.test)
    p_test = softmax(s_test)
    tau = fit_temperature(s_val, y_val)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = TemperatureScaling()
        ts.fit(softmax(s_val), y_val)
        p_ts = ts.transform(p_test)
        ece_theirs = float(ECE(bins=15).measure(p_test, y_test))
        ece_theirs_ts = float(ECE(bins=15).measure(p_ts, y_test))
    t_net = np.asarray(ts.temperature, dtype=float).ravel()
    return {
        "ece_ours": decision_metrics(p_test, y_test)["ece"],
        "ece_netcal": ece_theirs,
        "tau_ours": tau,
        "tau_netcal": float(1.0 / t_net[0])
        if t_net.size and t_net[0] != 0
        else float("nan"),  # netcal: w = 1/T
        "ece_after_ours": decision_metrics(softmax(s_test, tau), y_test)["ece"],
        "ece_after_netcal": ece_theirs_ts,
    }


def run_bench(data: SeedData, ctx: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"lines": {}}
    missing = missing_peers()
    if missing:
        ctx.peers_missing(missing)  # one line, also in report.md and metrics.json
    if "lm-eval" not in missing:
        r = lm_eval_check(data)
        out["lm_eval"] = r
        out["lines"]["lm-eval"] = (
            f"HFLM.loglikelihood on {r['n_pairs']} (context, continuation) pairs: max |diff| "
            f"{r['max_abs_diff']:.2e} ({'within' if r['match_1e-4'] else 'NOT within'} 1e-4); acc "
            f"{r['acc_lm_eval']:.3f} (ours {r['acc_ours']:.3f}), acc_norm {r['acc_norm_lm_eval']:.3f} "
            f"(ours normalize=char {r['acc_norm_ours_char']:.3f})"
        )
    if "netcal" not in missing:
        r = netcal_check(data)
        out["netcal"] = r
        out["lines"]["netcal"] = (
            f"ECE-15 {r['ece_netcal']:.4f} (ours {r['ece_ours']:.4f}); temperature {r['tau_netcal']:.3f} "
            f"(ours {r['tau_ours']:.3f}); ECE after scaling {r['ece_after_netcal']:.4f} (ours {r['ece_after_ours']:.4f})"
        )
    out["lines"]["trl"] = "GKD row not run: trl's GKDTrainer is not wired into this bench yet (see README)"
    for k, v in out["lines"].items():
        ctx.log(f"bench {k}: {v}")
    return out
