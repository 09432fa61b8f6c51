"""The reference rows of a reproduce run (no verdicts): ``reference.md`` next to the report."""

from __future__ import annotations

from typing import Any

import numpy as np

from .student import ARM_NAMES as NAMES


def _pct(x: float) -> str:
    return "nan" if x != x else f"{100 * x:.2f}"


def _mean(values: list[float]) -> float:
    return float(np.mean(values))


def reference_text(cfg: Any, seeds: list[dict[str, Any]], bench: dict[str, Any]) -> str:
    n = len(seeds)
    lines = [f"# Reference rows (no verdicts; means over {n} seed(s), test split, %)", ""]
    lines += ["## Students on pass-1 inputs", "",
              "| arm | acc | ECE-15 | ECE-15 after temperature | conf - acc | NLL | Brier | AURC | OCW@0.7 |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for arm, name in NAMES.items():
        m = {k: _mean([s["arms"][arm][k] for s in seeds]) for k in
             ("acc", "ece", "ece_temperature_scaled", "confidence", "nll", "brier", "aurc", "ocw@0.7")}  # fmt: skip
        lines.append(
            f"| {name} | {_pct(m['acc'])} | {_pct(m['ece'])} | {_pct(m['ece_temperature_scaled'])} | "
            f"{_pct(m['confidence'] - m['acc'])} | {m['nll']:.3f} | {m['brier']:.3f} | {m['aurc']:.3f} | "
            f"{_pct(m['ocw@0.7'])} |"
        )
    lines.append(
        f"| teacher (noisy Bayes) | {_pct(_mean([s['teacher_acc'] for s in seeds]))} | "
        f"{_pct(_mean([s['teacher_ece'] for s in seeds]))} | | | | | | |"
    )
    lines.append(
        f"| Bayes posterior | {_pct(_mean([s['bayes_acc'] for s in seeds]))} | "
        f"{_pct(_mean([s['bayes_ece'] for s in seeds]))} | | | | | | |"
    )
    cand = {
        k: _mean([s["route"]["candidates_acc"][k] for s in seeds])
        for k in seeds[0]["route"]["candidates_acc"]
    }
    lines += ["", "## bTTA on the ODD student (calibrated)", "",
              "Candidate accuracy on every test item: " + ", ".join(f"{k} {_pct(v)}" for k, v in cand.items()), "",
              "| target extra cost | router acc | realised cost | random acc | entropy-only acc (cost) | "
              "RouteLLM-style acc (cost) | official-fit router acc (cost) | routed share | HR / tmRAG / QD share | "
              "flip | RCR | OCW@0.7 |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for j, t in enumerate(cfg.route.targets):
        rs = [s["route"]["rows"][j] for s in seeds]

        def m(f):
            return _mean([f(r) for r in rs])  # noqa: B023

        share = " / ".join(_pct(m(lambda r, a=a: r["action_share"][a])) for a in ("HR", "tmRAG", "QD"))
        lines.append(
            f"| {float(t):g} | {_pct(m(lambda r: r['router']['acc']))} | {m(lambda r: r['router']['cost']):.3f} | "
            f"{_pct(m(lambda r: r['random']['acc']))} | {_pct(m(lambda r: r['entropy']['acc']))} "
            f"({m(lambda r: r['entropy']['cost']):.3f}, {rs[0]['entropy']['bundle']}) | "
            f"{_pct(m(lambda r: r['routellm']['acc']))} ({m(lambda r: r['routellm']['cost']):.3f}) | "
            f"{_pct(m(lambda r: r['official']['acc']))} ({m(lambda r: r['official']['cost']):.3f}) | "
            f"{_pct(m(lambda r: r['routed_share']))} | {share} | {_pct(m(lambda r: r['flip']))} | "
            f"{_pct(m(lambda r: r['rcr']))} | {_pct(m(lambda r: r['ocw_routed']))} |"
        )
    g = [s["route"]["greedy"] for s in seeds]
    lines += ["", f"Official greedy policy (2 rounds, refreshed features) at target {g[0]['target']:g}: "
              f"acc {_pct(_mean([x['acc'] for x in g]))}, realised cost {_mean([x['cost'] for x in g]):.3f}."]  # fmt: skip
    lines += [
        "",
        "## Always-on subsets",
        "",
        "| actions | extra cost | acc | within B - 1 |",
        "| --- | --- | --- | --- |",
    ]
    for j, row in enumerate(seeds[0]["route"]["always_on"]):
        acc = _mean([s["route"]["always_on"][j]["acc"] for s in seeds])
        lines.append(
            f"| {row['actions']} | {row['extra_cost']:.2f} | {_pct(acc)} | {'yes' if row['within_budget'] else 'no'} |"
        )
    lines += ["", f"## Per-feature router ablation (target {g[0]['target']:g})", "",
              "| refit without | acc | realised cost |", "| --- | --- | --- |"]  # fmt: skip
    for j, row in enumerate(seeds[0]["route"]["ablation"]):
        lines.append(
            f"| {row['without']} | {_pct(_mean([s['route']['ablation'][j]['acc'] for s in seeds]))} | "
            f"{_mean([s['route']['ablation'][j]['cost'] for s in seeds]):.3f} |"
        )
    acts = ("HR", "tmRAG", "QD")
    rates = {a: _mean([s["route"]["gain_label_rate"][a] for s in seeds]) for a in acts}
    gains = {a: _mean([s["route"]["mean_gain"][a] for s in seeds]) for a in acts}
    conv = {a: _mean([s["route"]["mean_gain_official"][a] for s in seeds]) for a in acts}
    lines += ["", "Gain labels on validation (pass-1 wrong and the action right), base rate / mean predicted gain "
              "(standardised, fitted to convergence: the headline) / mean predicted gain (the official fit, AdamW "
              "80 epochs on raw features): "
              + ", ".join(f"{a} {_pct(rates[a])} / {_pct(gains[a])} / {_pct(conv[a])}" for a in acts)]  # fmt: skip
    cands = seeds[0]["route"]["candidates_ocw"]
    ocws = {k: _mean([s["route"]["candidates_ocw"][k] for s in seeds]) for k in cands}
    lines += [
        "",
        "OCW@0.7 of each candidate on every test item: "
        + ", ".join(f"{k} {_pct(v)}" for k, v in ocws.items()),
    ]
    if bench:
        lines += ["", "## Peers (same inputs)", ""] + [
            f"- {k}: {v}" for k, v in bench.get("lines", {}).items()
        ]
    return "\n".join(lines) + "\n"
