"""The paper's claims C1–C5 in miniature (``iclr26-bolt reproduce``). Every verdict is computed from the
measurements with the spec's rule; nothing is typed in.

Per seed: a synthetic MCQA world with a known posterior; a tiny GPT-2 trained from one initialisation on the
same batches by ODD, SFT and token-level KD; the noisy-Bayes teacher; bTTA on the ODD student (routing.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr26_core.report import Claim, Results

from .experiment import gold, prepare, softmax, teacher_on, train_arms
from .metrics import decision_metrics, invalid_option_rate
from .route_eval import route_seed
from .routing import paired_boot_se
from .student import ARM_NAMES, ARMS, KD_ARMS


def _se(ses: list[float]) -> float:
    """SE of a mean over independent seeds from per-seed SEs."""
    return float(np.sqrt(np.sum(np.square(ses))) / len(ses))


def generate_answers(
    model: Any, tokenizer: Any, encoded: list[Any], max_new_tokens: int, batch_size: int = 64
) -> list[str]:
    """Greedy generation (≤ max_new_tokens, stopping at EOS or a newline) from each item's prompt ids;
    left-padded batches through ``model.generate``."""
    import torch

    newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
    stop = [tokenizer.eos_token_id, *newline[-1:]]
    pad = tokenizer.pad_token_id
    out = []
    model.eval()
    with torch.no_grad():
        for s in range(0, len(encoded), batch_size):
            prompts = [e.prompt_ids for e in encoded[s : s + batch_size]]
            width = max(map(len, prompts))
            ids = torch.full((len(prompts), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, p in enumerate(prompts):
                ids[i, width - len(p) :] = torch.tensor(p)
                mask[i, width - len(p) :] = 1
            gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                 do_sample=False, eos_token_id=stop, pad_token_id=pad)  # fmt: skip
            for row in gen[:, width:]:
                text = tokenizer.decode(row, skip_special_tokens=True)
                out.append(text.split("\n")[0].strip())
    return out


def run_seed(cfg: Any, seed: int, ctx: Any, keep: list[Any] | None = None) -> dict[str, Any]:
    data = prepare(cfg, seed)
    if keep is not None:
        keep.append(data)
    train_arms(data, cfg, progress=True)
    y = gold(data.test)
    arms: dict[str, Any] = {}
    correct: dict[str, np.ndarray] = {}
    val_y = gold(data.val)
    for arm in ARMS:
        s = data.arm_scores(arm, "test/low")
        met = decision_metrics(softmax(s), y)
        from .calibration import fit_temperature

        s_val = data.arm_scores(arm, "val/low")
        tau = fit_temperature(s_val, val_y)
        met["ece_temperature_scaled"] = decision_metrics(softmax(s, tau), y)["ece"]
        met["tau_cal"] = tau
        met["val_acc"] = float((s_val.argmax(-1) == val_y).mean())
        met["final_loss"] = float(np.mean(data.losses[arm][-20:]))
        arms[arm] = met
        correct[arm] = (s.argmax(-1) == y).astype(np.float64)
        if seed == int(cfg.seed):  # the reliability diagram's data (first seed), dropped from metrics.json
            met["_reliability"] = {
                "confidence": softmax(s).max(-1).tolist(),
                "correct": correct[arm].tolist(),
            }
    t_scores = teacher_on(data, cfg, data.test, salt=1)
    bayes = np.stack([data.world.log_posterior(it, list(range(it["n_visible"]))) for it in data.test])
    ctx.log(f"seed {seed}: trained; scoring the routing views and fitting the router")
    route = route_seed(data, cfg)
    # C5: generation by the SFT student vs option scoring
    n5 = min(int(cfg.c5.n_items), len(data.test))
    encs = data.enc["test/low"][:n5]
    texts = generate_answers(data.models["sft"], data.tokenizer, encs, int(cfg.c5.max_new_tokens))
    opts = [it["options"] for it in data.test[:n5]]
    sft_choice = data.arm_scores("sft", "test/low")[:n5].argmax(-1)
    scorer_pred = [it["options"][int(k)] for it, k in zip(data.test[:n5], sft_choice, strict=True)]
    return {
        "seed": seed,
        "arms": arms,
        "teacher_acc": float((t_scores.argmax(-1) == y).mean()),
        "teacher_ece": decision_metrics(softmax(t_scores, float(cfg.teacher.tau_kd)), y)["ece"],
        "bayes_acc": float((bayes.argmax(-1) == y).mean()),
        "bayes_ece": decision_metrics(np.exp(bayes), y)["ece"],
        "c1": {  # ODD minus each token-KD reading: per-item paired differences
            a: {
                "diff": float((correct["odd"] - correct[a]).mean()),
                "se": paired_boot_se(correct["odd"] - correct[a], int(cfg.route.boot), seed),
            }
            for a in KD_ARMS
        },
        "route": route,
        "c5": {
            "ior_generation": invalid_option_rate(texts, opts),
            "ior_scorer": invalid_option_rate(scorer_pred, opts),
            "generation_examples": texts[:8],
            "n_items": n5,
        },
    }


def _claims(cfg: Any, seeds: list[dict[str, Any]]) -> list[Claim]:
    def mean(f) -> float:
        return float(np.mean([f(s) for s in seeds]))

    n = len(seeds)
    acc = {a: mean(lambda s, a=a: s["arms"][a]["acc"]) for a in ARMS}
    ece = {a: mean(lambda s, a=a: s["arms"][a]["ece"]) for a in ARMS}
    # the stronger token-KD reading, chosen on validation accuracy (the test split decides nothing)
    val_acc = {a: mean(lambda s, a=a: s["arms"][a]["val_acc"]) for a in KD_ARMS}
    kd = max(KD_ARMS, key=lambda a: val_acc[a])
    d1, se1 = mean(lambda s: s["c1"][kd]["diff"]), _se([s["c1"][kd]["se"] for s in seeds])
    other = next(a for a in KD_ARMS if a != kd)
    d_o, se_o = mean(lambda s: s["c1"][other]["diff"]), _se([s["c1"][other]["se"] for s in seeds])
    c1 = Claim(
        "C1",
        "ODD beats token-level KD (pass-1 test accuracy)",
        "42.89 vs 37.58",
        {
            "ODD": round(100 * acc["odd"], 2),
            "token-KD": round(100 * acc[kd], 2),
            "diff": round(100 * d1, 2),
            "SE": round(100 * se1, 2),
            "SFT": round(100 * acc["sft"], 2),
        },
        bool(d1 >= 0.01 and d1 > 2 * se1),
        "mean acc(ODD) - acc(token-KD) >= 1.0 point and > 2 paired-bootstrap SEs, against the stronger token-KD "
        "reading (higher validation accuracy)",
        f"token-KD = {ARM_NAMES[kd]} (val acc {100 * val_acc[kd]:.2f} vs {100 * val_acc[other]:.2f}); "
        f"{ARM_NAMES[other]}: {100 * acc[other]:.2f}, ODD - it = {100 * d_o:.2f} (SE {100 * se_o:.2f}); "
        f"{n} seed(s) x {int(cfg.data.n_test)} test items",
    )
    t_acc, b_acc = mean(lambda s: s["teacher_acc"]), mean(lambda s: s["bayes_acc"])
    c2 = Claim(
        "C2",
        "the distilled student surpasses its teacher",
        "42.89 vs 36.74",
        {"ODD": round(100 * acc["odd"], 2), "teacher": round(100 * t_acc, 2), "Bayes": round(100 * b_acc, 2)},
        bool(acc["odd"] > t_acc),
        "mean acc(ODD) > acc(teacher) on the same pass-1 inputs",
        "partly by design: the gold CE anchor and averaging the teacher's noise over items",
    )
    gaps = {
        a: round(100 * mean(lambda s, a=a: s["arms"][a]["confidence"] - s["arms"][a]["acc"]), 2) for a in ARMS
    }
    c3 = Claim(
        "C3",
        "ODD lowers calibration error (before temperature scaling)",
        "qualitative (lower ECE)",
        {"ECE-15 x100": {a: round(100 * ece[a], 2) for a in ARMS}},
        bool(ece["odd"] < min(ece["sft"], ece[kd])),
        f"ECE(ODD) < min(ECE(SFT), ECE(token-KD)), mean over seeds; token-KD = {kd} (as in C1)",
        f"confidence - accuracy x100: {gaps}; Bayes ECE x100 {100 * mean(lambda s: s['bayes_ece']):.2f} "
        "(finite-sample floor; expected not to hold: SFT's optimum is the calibrated posterior)",
    )
    rows = [r for s in seeds for r in s["route"]["rows"]]
    keys = ("random", "entropy", "official_vs_entropy")
    adv = {k: float(np.mean([np.mean(s["route"]["per_item"][k]) for s in seeds])) for k in keys}
    ses = {}
    for k in keys:
        ses[k] = _se(
            [paired_boot_se(s["route"]["per_item"][k], int(cfg.route.boot), s["seed"]) for s in seeds]
        )
    holds4 = adv["random"] > 2 * ses["random"] and adv["entropy"] > -ses["entropy"]
    by_t = {}
    for t in [float(x) for x in cfg.route.targets]:
        rs = [r for r in rows if r["target"] == t]
        by_t[t] = {
            k: round(100 * float(np.mean([r[k]["acc"] for r in rs])), 2)
            for k in ("router", "random", "entropy")
        }
        by_t[t]["cost"] = round(float(np.mean([r["router"]["cost"] for r in rs])), 3)
    p1 = mean(lambda s: s["route"]["pass1"]["acc"])
    c4 = Claim(
        "C4",
        "budgeted routing adds accuracy where it pays and beats single-signal triggering at equal cost",
        "42.89 -> 50.50 (all augmentations); +1.4-2.2 over single-signal",
        {
            "pass-1": round(100 * p1, 2),
            **{f"@{t:g}": v for t, v in by_t.items()},
            "adv vs random": round(100 * adv["random"], 2),
            "SE": round(100 * ses["random"], 2),
            "adv vs entropy": round(100 * adv["entropy"], 2),
            "SE entropy": round(100 * ses["entropy"], 2),
        },
        bool(holds4),
        "mean advantage over budgets and seeds > 2 SEs vs random and > -1 paired SE vs entropy-only",
        "router = Lagrangian policy on [p_max, margin, H, rho], gain models on standardised features fitted to "
        "convergence; random = the router's decisions dealt to random items (same realised cost); entropy-only = "
        "one entropy threshold (HR, then HR+tmRAG past cost 0.5); extra arm, the official fit (AdamW 80 epochs, "
        f"raw features): {100 * adv['official_vs_entropy']:+.2f} (SE {100 * ses['official_vs_entropy']:.2f}) vs "
        "entropy-only",
    )
    ior_g = mean(lambda s: s["c5"]["ior_generation"])
    ior_s = mean(lambda s: s["c5"]["ior_scorer"])
    mid = len(cfg.route.targets) // 2
    ocw_p1 = mean(lambda s: s["route"]["pass1"]["ocw@0.7"])
    ocw_r = mean(lambda s: s["route"]["rows"][mid]["ocw_routed"])
    c5 = Claim(
        "C5",
        "option scoring removes invalid answers and overconfident errors",
        "IOR 0; OCW@0.7 4.18% -> 0.19%",
        {
            "IOR scorer": ior_s,
            "IOR generation": round(100 * ior_g, 2),
            "OCW@0.7 pass-1": round(100 * ocw_p1, 2),
            "OCW@0.7 routed": round(100 * ocw_r, 2),
        },
        bool(ior_s == 0 and ior_s < ior_g and ocw_r <= ocw_p1),
        "IOR(scorer) = 0 < IOR(generation) and OCW(routed) <= OCW(pass-1), means over seeds",
        f"generation: SFT student, greedy <= {int(cfg.c5.max_new_tokens)} tokens; routed at target "
        f"{float(cfg.route.targets[mid]):g}; IOR/OCW in %",
    )
    return [c1, c2, c3, c4, c5]


def run(cfg: Any, ctx: Any) -> Results:
    if str(cfg.scale.name) == "real":
        from .real import run as run_real

        return run_real(cfg, ctx)
    from .figures import frontier_figure, reliability_figure
    from .reference import reference_text

    seeds: list[dict[str, Any]] = []
    first: list[Any] = []
    for k in ctx.progress(range(int(cfg.seeds)), desc="seeds"):
        seeds.append(run_seed(cfg, int(cfg.seed) + k, ctx, keep=first if k == 0 else None))
        ctx.log(f"seed {int(cfg.seed) + k}: accuracy " + ", ".join(
            f"{a} {100 * seeds[-1]['arms'][a]['acc']:.1f}" for a in ARMS) + f", teacher {100 * seeds[-1]['teacher_acc']:.1f}")  # fmt: skip
    claims = _claims(cfg, seeds)
    figures = [
        frontier_figure(seeds, ctx.run_dir / "frontier.png"),
        reliability_figure(seeds[0], ctx.run_dir / "reliability.png"),
    ]
    bench: dict[str, Any] = {}
    if bool(cfg.get("bench", False)):
        from .peers import run_bench

        bench = run_bench(first[0], ctx)
    ref = reference_text(cfg, seeds, bench)
    (ctx.run_dir / "reference.md").write_text(ref)
    for s in seeds:
        for a in ARMS:
            s["arms"][a].pop("_reliability", None)
    return Results(claims=claims, metrics={"seeds": seeds, "bench": bench}, figures=figures)
