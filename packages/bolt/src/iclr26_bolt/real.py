"""``scale=real``: BOLT with a real LM. SmolLM2-135M-Instruct is the teacher scoring, by continuation, the four
options of real questions (`real_items`: the core's `mc_items`); the student is SmolLM2's first
``student_blocks`` decoder blocks (a smaller model initialised from the teacher, final norm and tied head kept),
distilled with LoRA at the paper's recipe by ODD, SFT and both token-KD readings; bTTA's router runs on the ODD
student's features with HR (neighbouring sentences as context) and tmRAG (4 retrieved exemplars prepended).
Claims R1 (C1) and R2 (C4) with the miniature's rules, each behind a headroom gate fixed before the run
(`real_claims`): a claim whose gate fails is "undecided". No QD (it generates 3 × 128 tokens per item)."""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import torch

from iclr26_core.errors import UserError
from iclr26_core.report import Results

from .calibration import fit_temperature
from .distill import distill
from .features import router_features
from .metrics import decision_metrics
from .pipeline import Pipeline
from .real_claims import claims, reference_text
from .real_items import TEMPLATE, bolt_items, cached_teacher_scores
from .route_eval import single_threshold
from .router import Action, BudgetRouter
from .routing import Candidates, outcomes, random_assignment, subsets_table
from .scorer import OptionScorer
from .teacher import TeacherCache

ROUTE_ACTIONS = ("HR", "tmRAG")
TEACHER = "SmolLM2-135M-Instruct"


def truncated_student(teacher: Any, blocks: int | Sequence[int]) -> Any:
    """A copy of a Llama-style model keeping decoder blocks ``blocks`` (an int n: the first n; a list: those
    indices, in order, e.g. the first three and the last), with embeddings, final norm and tied head unchanged."""
    n_all = len(teacher.model.layers)
    keep = list(range(blocks)) if isinstance(blocks, int) else [int(b) % n_all for b in blocks]
    if not keep or len(set(keep)) != len(keep) or max(keep) >= n_all:
        raise UserError(
            f"student blocks must be distinct indices of the teacher's {n_all} blocks, got {blocks!r}"
        )
    student = copy.deepcopy(teacher)
    student.model.layers = torch.nn.ModuleList([student.model.layers[b] for b in keep])
    for j, layer in enumerate(
        student.model.layers
    ):  # the key/value cache is indexed by position in the stack
        layer.self_attn.layer_idx = j
    student.config.num_hidden_layers = len(keep)
    if getattr(student.config, "layer_types", None):
        student.config.layer_types = [student.config.layer_types[b] for b in keep]
    return student.eval()


def _scores(scorer: OptionScorer, items: list[dict[str, Any]], key: str = "context") -> np.ndarray:
    rows = [{**it, "context": it.get(key) or None} for it in items]
    with torch.no_grad():
        return torch.stack(scorer.score_items(rows)).double().numpy()


def _softmax(s: np.ndarray, tau: float = 1.0) -> np.ndarray:
    z = s / tau - (s / tau).max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _gold(items: list[dict[str, Any]]) -> np.ndarray:
    return np.array([it["answer"] for it in items])


def _candidates(pipe: Pipeline, scorer: OptionScorer, items: list[dict[str, Any]], tau: float) -> Candidates:
    p1 = _softmax(_scores(scorer, items), tau)
    hr = _softmax(_scores(scorer, items, "context_hr"), tau)
    rag, rho = [], []
    for it in items:
        p, r = pipe.rag(it)
        rag.append(p.numpy() if p is not None else p1[len(rag)])
        rho.append(r)
    n = p1.shape[0]
    return Candidates(
        p1,
        hr,
        np.stack(rag),
        p1,
        p1[:, None],
        np.array(rho),
        np.ones(n),
        _gold(items),
        np.zeros(n, dtype=bool),
    )


def _arm(cfg: Any, base: Any, tok: Any, items: dict[str, list], cache: TeacherCache, arm: str) -> tuple:
    r = cfg.real
    t1 = time.process_time()
    model = distill(
        copy.deepcopy(base),
        tok,
        items["train"],
        cache,
        lr=float(r.lr),
        grad_accum=int(r.grad_accum),
        epochs=int(r.epochs),
        template=TEMPLATE,
        seed=int(cfg.seed),
        device="cpu",
        progress=True,
        arm=arm,
    )
    sc = OptionScorer(model, tok, template=TEMPLATE, share_prompt=True, batch_size=int(r.batch_size))
    s_val, s_test = _scores(sc, items["val"]), _scores(sc, items["test"])
    y_val, y_test = _gold(items["val"]), _gold(items["test"])
    met = decision_metrics(_softmax(s_test), y_test)
    met["val_acc"] = float((s_val.argmax(-1) == y_val).mean())
    met["val_nll"] = decision_metrics(_softmax(s_val), y_val)["nll"]
    met["correct"] = (s_test.argmax(-1) == y_test).astype(float)
    met["cpu_s"] = time.process_time() - t1
    return met, (sc, s_val)


def _route(cfg: Any, pipe: Pipeline, sc: OptionScorer, items: dict[str, list], tau: float) -> dict[str, Any]:
    """bTTA on the ODD student: candidates, the router fitted on validation, the targets on test."""
    val, test = _candidates(pipe, sc, items["val"], tau), _candidates(pipe, sc, items["test"], tau)
    costs = {a: float(cfg.route.costs[a]) for a in ("HR", "tmRAG", "QD")}
    budget = float(cfg.route.budget)
    o_test = outcomes(test)
    f_val = router_features(torch.from_numpy(val.p1), torch.from_numpy(val.rho), None)
    f_test = router_features(torch.from_numpy(test.p1), torch.from_numpy(test.rho), None)
    labels = val.gain_labels()[:, :2]
    router = BudgetRouter([Action(a, costs[a]) for a in ROUTE_ACTIONS], budget=budget, seed=int(cfg.seed))
    router.fit(f_val, labels)
    rows, adv_r, adv_e = [], [], []
    h_val, h_test = f_val[:, 2].numpy(), f_test[:, 2].numpy()
    for target in [float(t) for t in cfg.real.targets]:
        router.tune(f_val, target)
        dec = router.decide(f_test)
        masks = np.array([sum(1 << ("HR", "tmRAG", "QD").index(a) for a in d) for d in dec], dtype=np.int64)
        c_r = o_test.of(masks)[0]
        c_rand = random_assignment(o_test, masks)
        m_e, _, cost_e = single_threshold(h_val, h_test, target, costs, budget)
        c_e = o_test.of(m_e)[0]
        adv_r.append(c_r - c_rand)
        adv_e.append(c_r - c_e)
        rows.append(
            {
                "target": target,
                "router": float(c_r.mean()),
                "cost": float(router.extra_cost(dec).mean()),
                "random": float(c_rand.mean()),
                "entropy": float(c_e.mean()),
                "entropy_cost": cost_e,
                "share": {a: float(np.mean([a in d for d in dec])) for a in ROUTE_ACTIONS},
            }
        )
    y = _gold(items["test"])
    return {
        "rows": rows,
        "adv_random": np.mean(adv_r, 0),
        "adv_entropy": np.mean(adv_e, 0),
        "candidates_acc": {k: float((getattr(test, k).argmax(-1) == y).mean()) for k in ("p1", "hr", "rag")},
        "gain_label_rate": labels.mean(0).tolist(),
        "always_on": subsets_table(o_test, costs, budget),
    }


def run(cfg: Any, ctx: Any) -> Results:
    from iclr26_core.pretrained import load_smollm2

    r = cfg.real
    t0 = time.process_time()
    splits = {"train": "calib", "val": "val", "test": "test"}
    items = {k: bolt_items(v, int(r[f"n_{k}"]), int(cfg.seed), str(r.kind)) for k, v in splits.items()}
    ctx.log("items: " + ", ".join(f"{k} {len(v)}" for k, v in items.items()) + f" ({r.kind})")
    teacher, tok = load_smollm2(dtype=torch.float32)
    t_scorer = OptionScorer(teacher, tok, template=TEMPLATE, share_prompt=True, batch_size=int(r.batch_size))
    key = f"{TEACHER}|float32|{TEMPLATE!r}"
    s_t, hits = {}, []
    for k in ("train", "test"):
        s_t[k], hit = cached_teacher_scores(items[k], key, partial(_scores, t_scorer))
        hits.append(hit)
    timing = {"teacher_scoring_cpu_s": time.process_time() - t0, "teacher_scores_cached": all(hits)}
    cache = TeacherCache.from_scores(
        [it["id"] for it in items["train"]],
        s_t["train"],
        _gold(items["train"]).tolist(),
        float(r.tau_kd),
        TEACHER,
    )
    cache.save(ctx.run_dir / "teacher_cache.jsonl")
    blocks = r.student_blocks if isinstance(r.student_blocks, int) else [int(b) for b in r.student_blocks]
    base = truncated_student(teacher, blocks)
    del teacher, t_scorer
    s_base = _scores(OptionScorer(base, tok, template=TEMPLATE, share_prompt=True), items["test"])
    arms: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for arm in [str(a) for a in r.arms]:
        arms[arm], models[arm] = _arm(cfg, base, tok, items, cache, arm)
        ctx.log(f"{arm}: test acc {100 * arms[arm]['acc']:.1f}, val acc {100 * arms[arm]['val_acc']:.1f}")
    sc, s_val = models["odd"]
    tau = fit_temperature(s_val, _gold(items["val"]))
    pipe = Pipeline(sc, tau_cal=tau, memory=items["train"], k_r=int(cfg.route.k_r), base_edge=None)
    t2 = time.process_time()
    route = _route(cfg, pipe, sc, items, tau)
    timing["routing_cpu_s"] = time.process_time() - t2
    y_test = _gold(items["test"])
    metrics = {
        "kind": str(r.kind),
        "items": {k: len(v) for k, v in items.items()},
        "items_sample": items["test"][:3],
        "teacher_acc": float((s_t["test"].argmax(-1) == y_test).mean()),
        "teacher_train_acc": float((s_t["train"].argmax(-1) == _gold(items["train"])).mean()),
        "teacher_ece": decision_metrics(_softmax(s_t["test"], float(r.tau_kd)), y_test)["ece"],
        "student_before": decision_metrics(_softmax(s_base), y_test),
        "student_blocks": blocks,
        "arms": arms,
        "tau_cal": tau,
        "route": route,
    }
    out = claims(cfg, metrics)
    for m in arms.values():
        m["correct"] = m["correct"].tolist()
    for k in ("adv_random", "adv_entropy"):
        route[k] = route[k].tolist()
    metrics["cpu"] = {**timing, "total_cpu_s": time.process_time() - t0}
    ref = reference_text(metrics)
    (ctx.run_dir / "reference.md").write_text(ref)
    ctx.log(ref)
    return Results(claims=out, metrics=metrics, figures=[])
