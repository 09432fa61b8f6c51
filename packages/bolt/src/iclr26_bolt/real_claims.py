"""The claims of ``scale=real`` and their headroom gates, fixed before the run (``cfg.real.gate``).

A model is *above chance* on n test items when acc − 1/K ≥ ``margin`` and acc − 1/K > ``z`` binomial SEs
(SE = √(acc(1 − acc)/n)). R1 (C1) is decided only when the teacher and the best student arm are above chance;
R2 (C4) only when the ODD student's pass-1 is above chance and some action fixes a wrong pass-1 answer on at
least ``min_fix`` of the validation items (else there is nothing to route). A claim whose gate fails is
``Claim(decided=False)``: "undecided"."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from iclr26_core.report import Claim

from .routing import paired_boot_se
from .student import ARM_NAMES, KD_ARMS

CHANCE = 0.25  # four options


def above_chance(acc: float, n: int, margin: float, z: float, chance: float = CHANCE) -> dict[str, Any]:
    """The headroom gate of one accuracy: {"acc", "se", "ok"}."""
    se = math.sqrt(max(acc * (1 - acc), 0.0) / max(n, 1))
    return {"acc": acc, "se": se, "ok": bool(acc - chance >= margin and acc - chance > z * se)}


def stronger_kd(arms: dict[str, Any]) -> str:
    """The token-KD reading with the higher validation accuracy (ties: the lower validation NLL)."""
    kds = [a for a in KD_ARMS if a in arms]
    return max(kds, key=lambda a: (arms[a]["val_acc"], -arms[a]["val_nll"]))


def _pct(x: float) -> float:
    return round(100 * float(x), 2)


def _r1(cfg: Any, m: dict[str, Any], gate: dict[str, Any]) -> Claim:
    arms, boot, seed = m["arms"], int(cfg.route.boot), int(cfg.seed)
    kd = stronger_kd(arms)
    m["kd_reading"] = kd

    def vs(other: str) -> tuple[float, float]:
        diff = np.asarray(arms["odd"]["correct"]) - np.asarray(arms[other]["correct"])
        return float(diff.mean()), paired_boot_se(diff, boot, seed)

    d1, se1 = vs(kd)
    holds = d1 >= 0.01 and d1 > 2 * se1
    powered = holds or d1 + 2 * se1 < float(cfg.real.gate.r1_effect)
    decided = gate["teacher"]["ok"] and gate["best_arm"]["ok"] and powered
    extra = [
        f"ODD - {ARM_NAMES[a]} = {_pct(vs(a)[0])} (SE {_pct(vs(a)[1])})" for a in arms if a not in ("odd", kd)
    ]
    return Claim(
        "R1",
        "ODD beats token-level KD (C1) with a real teacher",
        "42.89 vs 37.58",
        {"ODD": _pct(arms["odd"]["acc"]), "token-KD": _pct(arms[kd]["acc"]), "diff": _pct(d1), "SE": _pct(se1)},
        bool(decided and holds),
        "acc(ODD) - acc(token-KD) >= 1.0 point and > 2 paired-bootstrap SEs on the test items, against the "
        "stronger token-KD reading (validation accuracy); decided only if the teacher and the best student arm "
        f"are above chance (gate), and a no only if diff + 2 SE < the paper's {_pct(cfg.real.gate.r1_effect)} "
        "points",
        f"token-KD = {ARM_NAMES[kd]}; " + "; ".join(extra)
        + f"; teacher {_pct(m['teacher_acc'])}, student before distillation {_pct(m['student_before']['acc'])}; "
        f"gate: best arm {gate['best_arm']['name']} {_pct(gate['best_arm']['acc'])} (SE {_pct(gate['best_arm']['se'])})"
        f"; {m['items']['test']} test items",
        decided=bool(decided),
    )  # fmt: skip


def _r2(cfg: Any, m: dict[str, Any], gate: dict[str, Any]) -> Claim:
    route, boot, seed = m["route"], int(cfg.route.boot), int(cfg.seed)
    a_r, a_e = np.asarray(route["adv_random"]), np.asarray(route["adv_entropy"])
    se_r, se_e = (paired_boot_se(a, boot, seed) for a in (a_r, a_e))
    cand = route["candidates_acc"]
    holds = a_r.mean() > 2 * se_r and a_e.mean() > -se_e
    effect = float(cfg.real.gate.r2_effect)
    powered = holds or a_r.mean() + 2 * se_r < effect or a_e.mean() + 2 * se_e < 0
    decided = gate["odd"]["ok"] and gate["fix_rate"] >= float(cfg.real.gate.min_fix) and powered
    per_target = {
        f"@{x['target']:g}": {
            "router": _pct(x["router"]),
            "random": _pct(x["random"]),
            "entropy": _pct(x["entropy"]),
            "cost": round(x["cost"], 3),
        }
        for x in route["rows"]
    }
    return Claim(
        "R2",
        "budgeted routing beats random and single-signal triggering at equal cost (C4)",
        "+1.4-2.2 over single-signal",
        {
            "pass-1": _pct(cand["p1"]),
            **per_target,
            "adv vs random": _pct(a_r.mean()),
            "SE": _pct(se_r),
            "adv vs entropy": _pct(a_e.mean()),
            "SE entropy": _pct(se_e),
        },
        bool(decided and holds),
        "mean advantage over targets > 2 SEs vs random and > -1 paired SE vs entropy-only; decided only if the "
        f"ODD student is above chance and an action fixes >= {100 * float(cfg.real.gate.min_fix):g} % of the "
        f"validation items (gate), and a no only if adv vs random + 2 SE < the paper's {_pct(effect)} points or "
        "adv vs entropy + 2 SE < 0",
        f"ODD student; actions HR (neighbouring sentences as context) and tmRAG ({int(cfg.route.k_r)} exemplars); "
        f"candidates: pass-1 {_pct(cand['p1'])}, HR {_pct(cand['hr'])}, tmRAG {_pct(cand['rag'])}; validation gain "
        f"rates HR {_pct(route['gain_label_rate'][0])}, tmRAG {_pct(route['gain_label_rate'][1])} %",
        decided=bool(decided),
    )  # fmt: skip


def claims(cfg: Any, m: dict[str, Any]) -> list[Claim]:
    """R1 and R2 from the run's measurements ``m`` (adds ``m["gate"]`` and ``m["kd_reading"]``)."""
    g, n = cfg.real.gate, int(m["items"]["test"])
    best = max(m["arms"], key=lambda a: m["arms"][a]["acc"])
    gate = {
        "teacher": above_chance(m["teacher_acc"], n, float(g.margin), float(g.z)),
        "best_arm": {"name": best, **above_chance(m["arms"][best]["acc"], n, float(g.margin), float(g.z))},
        "odd": above_chance(m["route"]["candidates_acc"]["p1"], n, float(g.margin), float(g.z)),
        "fix_rate": float(max(m["route"]["gain_label_rate"])),
    }
    m["gate"] = gate
    return [_r1(cfg, m, gate), _r2(cfg, m, gate)]


def reference_text(m: dict[str, Any]) -> str:
    """The run's reference tables (no verdicts): arms, gate, routing."""
    n = m["items"]["test"]

    def se(acc: float) -> str:
        return f"{100 * math.sqrt(acc * (1 - acc) / n):.2f}"

    b = m["student_before"]
    lines = [
        "| arm (test) | acc % | SE | val acc % | ECE-15 x100 | NLL | CPU s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| teacher ({m.get('teacher', 'SmolLM2-135M-Instruct')}, 30 blocks) | {_pct(m['teacher_acc'])} | "
        f"{se(m['teacher_acc'])} | | {_pct(m['teacher_ece'])} (at tau_kd) | | |",
        f"| student before distillation (blocks {m['student_blocks']}) | {_pct(b['acc'])} | {se(b['acc'])} | | "
        f"{_pct(b['ece'])} | {b['nll']:.3f} | |",
    ]
    for a, x in m["arms"].items():
        lines.append(
            f"| {ARM_NAMES[a]} | {_pct(x['acc'])} | {se(x['acc'])} | {_pct(x['val_acc'])} | {_pct(x['ece'])} | "
            f"{x['nll']:.3f} | {x['cpu_s']:.0f} |"
        )
    g, route = m["gate"], m["route"]
    lines += [
        "",
        f"Gate (chance 25 %): teacher {_pct(g['teacher']['acc'])} ({'ok' if g['teacher']['ok'] else 'fails'}), "
        f"best arm {ARM_NAMES[g['best_arm']['name']]} {_pct(g['best_arm']['acc'])} "
        f"({'ok' if g['best_arm']['ok'] else 'fails'}), ODD pass-1 {_pct(g['odd']['acc'])} "
        f"({'ok' if g['odd']['ok'] else 'fails'}), best validation fix rate {_pct(g['fix_rate'])} %.",
        f"Token-KD reading for R1 (validation): {ARM_NAMES[m['kd_reading']]}; tau_cal of the ODD student "
        f"{m['tau_cal']:.3g}.",
        "",
        "| target extra cost | router acc % | realised cost | HR share | tmRAG share | random acc % | "
        "entropy-only acc % (cost) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for x in route["rows"]:
        lines.append(
            f"| {x['target']:g} | {_pct(x['router'])} | {x['cost']:.3f} | {_pct(x['share']['HR'])} | "
            f"{_pct(x['share']['tmRAG'])} | {_pct(x['random'])} | {_pct(x['entropy'])} ({x['entropy_cost']:.3f}) |"
        )
    on = ", ".join(f"{r['actions']} {_pct(r['acc'])}" for r in route["always_on"] if "QD" not in r["actions"])
    lines += ["", f"Always-on (test acc %): pass-1 {_pct(route['candidates_acc']['p1'])}, {on}.", ""]
    cpu = m.get("cpu", {})
    if cpu:
        lines.append(
            "CPU s: "
            + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in cpu.items())
        )
    return "\n".join(lines) + "\n"
