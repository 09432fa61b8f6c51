"""Claims C1-C6 from the measured accuracies, by the spec's rules; each verdict must hold for every pretraining
seed, on the mean over SFT seeds. Peer checks V1-V4 from `peers` results."""

from __future__ import annotations

import statistics
from typing import Any

from iclr26_core.report import Claim

from .evaluate import gains


class Accuracies:
    """``acc(arm, p)``: mean over SFT seeds of the post-SFT accuracy; ``base(pre, p)``: after pretraining."""

    def __init__(self, runs: dict[int, dict[str, dict]], sft_seeds: int) -> None:
        self.runs, self.sft_seeds = runs, sft_seeds
        self.pseeds = sorted(runs)

    def per_seed(self, arm: str, p: int, key: str = "mean") -> list[float]:
        runs = self.runs[p]  # reference rows may run on fewer SFT seeds
        return [
            runs[f"{arm}/s{s}"]["sft"]["eval"][key] for s in range(self.sft_seeds) if f"{arm}/s{s}" in runs
        ]

    def acc(self, arm: str, p: int) -> float:
        return statistics.fmean(self.per_seed(arm, p))

    def rare(self, arm: str, p: int) -> float:
        """Accuracy on the problems whose answer is not the family's majority answer (mean over SFT seeds)."""
        return statistics.fmean(self.per_seed(arm, p, "non_majority"))

    def rare_mean(self, arm: str) -> float:
        return statistics.fmean(self.rare(arm, p) for p in self.pseeds)

    def mean(self, arm: str) -> float:
        return statistics.fmean(self.acc(arm, p) for p in self.pseeds)

    def base(self, pre: str, p: int) -> float:
        return self.runs[p][f"{pre}->S_hq/s0"]["pretrain"]["eval"]["mean"]

    def has(self, arm: str) -> bool:
        return all(f"{arm}/s0" in self.runs[p] for p in self.pseeds)

    def table(self) -> dict[str, dict[str, Any]]:
        arms = sorted({a.rsplit("/", 1)[0] for p in self.pseeds for a in self.runs[p]})
        return {
            a: {
                "mean": self.mean(a),
                "non_majority": self.rare_mean(a),
                "per_pretrain_seed": [self.acc(a, p) for p in self.pseeds],
                "per_run": [self.per_seed(a, p) for p in self.pseeds],
            }
            for a in arms
        }


def _pm(x: float) -> str:
    return f"{x:+.3f}"


def _gap_text(a: float, b: float) -> str:
    g = gains(a, b)
    rel = "n/a" if g["rel"] is None else f"{100 * g['rel']:+.0f} %"
    return f"{a:.3f} vs {b:.3f} ({_pm(g['abs'])}, {rel})"


def _seeds(acc: Accuracies, a: str, b: str) -> str:
    return ", ".join(f"p{p}: {_pm(acc.acc(a, p) - acc.acc(b, p))}" for p in acc.pseeds)


def _spread(acc: Accuracies, arm: str) -> float:
    """The largest range of one arm's accuracy over SFT seeds (run-to-run noise of the SFT stage)."""
    return max(max(acc.per_seed(arm, p)) - min(acc.per_seed(arm, p)) for p in acc.pseeds)


def _ref(acc: Accuracies, a: str, b: str, steps: int, margin: float | None) -> str:
    ra, rb = f"{a}@{steps}", f"{b}@{steps}"
    if not (acc.has(ra) and acc.has(rb)):
        return ""
    diffs = [acc.acc(ra, p) - acc.acc(rb, p) for p in acc.pseeds]
    ok = all(d >= margin for d in diffs) if margin is not None else all(d < 0 for d in diffs)
    word = "gap survives" if margin is not None else "still lower"
    return f"; at {steps} SFT steps {_gap_text(acc.mean(ra), acc.mean(rb))}, {word}: {'yes' if ok else 'no'}"


def _rare_text(acc: Accuracies, a: str, b: str) -> str:
    return f"; non-majority problems {acc.rare_mean(a):.3f} vs {acc.rare_mean(b):.3f}"


def _ahead(
    acc: Accuracies, cid: str, text: str, paper: str, a: str, b: str, margin: float, why: str, note: str = ""
) -> Claim:
    """Arm ``a`` at least ``margin`` above arm ``b`` for every pretraining seed (the rule of C1, C3, C4)."""
    holds = all(acc.acc(a, p) >= acc.acc(b, p) + margin for p in acc.pseeds)
    rule = f"acc({a}) >= acc({b}) + {margin} for every pretraining seed ({why})"
    note = f"per pretraining seed {_seeds(acc, a, b)}{_rare_text(acc, a, b)}{note}"
    return Claim(cid, text, paper, _gap_text(acc.mean(a), acc.mean(b)), holds, rule, note)


def planted(acc: Accuracies, base: dict[str, Any], margin: float, share: str = "1/2") -> Claim:
    """The precondition of C1-C6: a model pretrained on the evaluated tasks themselves (P_direct, the same
    tokens as every arm) clearly beats the answer-prior baselines, on all problems and on the non-majority ones."""
    a, maj, chance = "P_direct->S_hq", float(base["majority"]), float(base["chance"])
    ok = [acc.acc(a, p) >= maj + margin and acc.rare(a, p) >= chance + margin for p in acc.pseeds]
    seeds = ", ".join(f"p{p}: {acc.acc(a, p):.3f} / {acc.rare(a, p):.3f}" for p in acc.pseeds)
    return Claim(
        "P1",
        "Planted check: a model trained directly on the evaluated tasks beats the answer-prior baselines",
        "precondition (not a paper claim)",
        f"acc {acc.mean(a):.3f}, non-majority {acc.rare_mean(a):.3f} vs majority {maj:.3f}, chance {chance:.3f}",
        all(ok),
        f"acc >= majority + {margin} and non-majority acc >= chance + {margin}, every pretraining seed",
        f"P_direct = general text + {share} the evaluated tasks (evaluation format, clean), then S_hq; per pretraining "
        f"seed acc / non-majority {seeds}",
    )


def claims(
    acc: Accuracies, margin: float, ref_steps: int, big_extra: int = 48, q_big: float = 0.5
) -> list[Claim]:
    out = []
    pm = acc.pseeds
    # C1 front-loading
    a, b = "P_div->S_hq", "P0->S_hq"
    spread = f"; SFT-seed spread up to {_spread(acc, a):.3f}" + _ref(acc, a, b, ref_steps, margin)
    text = "Front-loading reasoning into pretraining gives gains that persist after SFT"
    out.append(
        _ahead(acc, "C1", text, "+19 % average after SFT and RL", a, b, margin, "mean over SFT seeds", spread)
    )
    # C2 later SFT cannot catch up
    a, b = "P0->S_move", "P_div->S_hq"
    holds = all(acc.acc(a, p) < acc.acc(b, p) for p in pm)
    extra = _rare_text(acc, a, b)
    extra += f"; P0->S_hq2 (doubled clean SFT) {acc.mean('P0->S_hq2'):.3f}" if acc.has("P0->S_hq2") else ""
    out.append(
        Claim(
            "C2",
            "Later SFT cannot catch up, even with the reasoning tokens moved into it",
            "doubling SFT still below (qualitative)",
            _gap_text(acc.mean(a), acc.mean(b)),
            holds,
            "acc(P0->S_move) < acc(P_div->S_hq) for every pretraining seed; S_move = S_hq + P_div's pretraining "
            "reasoning tokens (Plan.move_tokens)",
            f"per pretraining seed {_seeds(acc, a, b)}{extra}",
        )
    )
    # C3 diversity in pretraining, C4 quality in SFT
    text = "Pretraining benefits most from diversity of reasoning patterns"
    out.append(
        _ahead(acc, "C3", text, "+11 % average", "P_div->S_hq", "P_hq->S_hq", margin, "same reasoning tokens")
    )
    text, paper = "SFT is most sensitive to data quality", "+15 % average with high-quality SFT data"
    out.append(_ahead(acc, "C4", text, paper, "P_div->S_hq", "P_div->S_bad", margin, "same size"))
    # C5 latent effect of high-quality pretraining data
    post = [acc.acc("P_hq->S_hq", p) - acc.acc("P_hq-bad->S_hq", p) for p in pm]
    base = [acc.base("P_hq", p) - acc.base("P_hq-bad", p) for p in pm]
    holds = all(dp > db for dp, db in zip(post, base, strict=True))
    out.append(
        Claim(
            "C5",
            "High-quality pretraining data has a latent effect that shows only after SFT",
            "qualitative",
            f"delta_post {_pm(statistics.fmean(post))} vs delta_base {_pm(statistics.fmean(base))}",
            holds,
            "delta_post = acc_post(P_hq) - acc_post(P_hq-bad) > delta_base (the same before SFT), every pretraining seed",
            "per pretraining seed "
            + ", ".join(f"p{p}: post {_pm(x)}, base {_pm(y)}" for p, x, y in zip(pm, post, base, strict=True))
            + f"; base acc P_hq {statistics.fmean(acc.base('P_hq', p) for p in pm):.3f}, "
            f"P_hq-bad {statistics.fmean(acc.base('P_hq-bad', p) for p in pm):.3f}",
        )
    )
    # C6 naive scaling of mixed-quality SFT data
    a, b = "P_div->S_big", "P_div->S_hq"
    holds = all(acc.acc(a, p) < acc.acc(b, p) for p in pm)
    out.append(
        Claim(
            "C6",
            "Naively scaling mixed-quality SFT data hurts",
            "about -5 % on math (author statement)",
            _gap_text(acc.mean(a), acc.mean(b)),
            holds,
            f"acc(P_div->S_big) < acc(P_div->S_hq) for every pretraining seed (S_big = S_hq + {big_extra}/family with q_bad {q_big})",
            f"per pretraining seed {_seeds(acc, a, b)}{_rare_text(acc, a, b)}"
            + _ref(acc, a, b, ref_steps, None),
        )
    )
    return out


def peer_claims(peers: dict[str, Any], ours_acc: float | None, acc_tol: float = 0.03) -> list[Claim]:
    """V1-V4: the same stage through trl, transformers' Trainer, datatrove and lm-eval."""
    out = []
    t = peers.get("trl")
    if t and "missing" not in t:
        acc_trl = t["eval"]["mean"]
        d_acc = abs(acc_trl - ours_acc) if ours_acc is not None else float("nan")
        holds = t["step1_abs_diff"] <= 1e-5 and d_acc <= acc_tol
        out.append(
            Claim(
                "V1",
                "Our answer-only SFT stage = trl SFTTrainer (completion-only loss)",
                "established path",
                f"step-1 loss diff {t['step1_abs_diff']:.1e}; acc {acc_trl:.3f} vs ours {ours_acc:.3f}",
                holds,
                f"|loss diff| <= 1e-5 and |acc diff| <= {acc_tol}",
                f"trl {t['steps']} steps from the same P_div weights, optimizer and schedule; data order differs",
            )
        )
    h = peers.get("trainer")
    if h and "missing" not in h:
        holds = h["step1_abs_diff"] <= 1e-5 and h["max_abs_diff"] <= 1e-3
        out.append(
            Claim(
                "V2",
                "Our packed pretraining stage = transformers Trainer at equal data order",
                "established path",
                f"step-1 diff {h['step1_abs_diff']:.1e}, max over {h['steps']} steps {h['max_abs_diff']:.1e}",
                holds,
                "|step-1 loss diff| <= 1e-5 and max |loss diff| <= 1e-3",
                "same blocks, order, AdamW and schedule",
            )
        )
    d = peers.get("datatrove")
    if d and "missing" not in d:
        holds = d["ours_max_dev"] <= 0.01
        out.append(
            Claim(
                "V3",
                "Achieved token fractions follow the mixture weights (ours vs datatrove's sampler)",
                "tokens.json: achieved, not only requested",
                f"max deviation ours {d['ours_max_dev']:.4f}, datatrove {d['datatrove_max_dev']:.4f}",
                holds,
                "our max |achieved - requested fraction| <= 0.01",
                "datatrove: SamplerFilter (keep each document with p = requested/available) + TokensCounter",
            )
        )
    e = peers.get("lm_eval")
    if e and "missing" not in e:
        holds = e["agreement"] >= 0.99
        out.append(
            Claim(
                "V4",
                "Our exact-match evaluation = lm-eval's HFLM generate_until on the same prompts",
                "established path",
                f"acc {e['acc_lm_eval']:.3f} vs ours {e['acc_ours']:.3f}, "
                f"per-item agreement {e['agreement']:.3f}",
                holds,
                "per-item agreement >= 0.99",
                f"{e['n']} held-out problems, greedy, stop at newline",
            )
        )
    return out
