"""The verdicts of claims C1–C6: pure functions from measured numbers to a `Claim` (rules of the spec).

Nothing here measures; ``experiments.py`` does, and passes the raw numbers in.
"""

from __future__ import annotations

import itertools
import math

from iclr26_core.report import Claim


def claim_c1(
    exact: dict[str, float],
    equal: dict[str, float],
    text_exact: dict[str, float],
    naive_fail: float | None,
    transport: str = "cover text re-tokenises exactly (else the ids are sent)",
):
    holds = all(v == 1.0 for v in exact.values()) and all(v == 1.0 for v in equal.values())
    te = ", ".join(f"{k} {v:.2f}" for k, v in text_exact.items())
    return Claim(
        "C1",
        "a text hides in another text of the same token length and is recovered",
        "qualitative",
        {"exact": exact, "equal_len": equal},
        holds,
        "exact-match rate = 1 and equal token length = 1 for every model",
        f"{transport}: {te}"
        + (
            ""
            if naive_fail is None
            else f"; naive BPE (no filter) text round-trip failure rate {naive_fail:.2f}"
        ),
    )


def claim_c2(stego: list[float], genuine: list[float], rand: list[float]) -> tuple[Claim, list[float]]:
    ratios = [(s - r) / (g - r) for s, g, r in zip(stego, genuine, rand)]
    mean_ratio = sum(ratios) / len(ratios)
    m = [sum(v) / len(v) for v in (stego, genuine, rand)]
    return Claim(
        "C2",
        "the cover text is plausible (close to genuine text, far from random)",
        "qualitative",
        round(mean_ratio, 4),
        mean_ratio >= 0.8,
        "mean over cases of (stego − random)/(genuine − random) ≥ 0.8",
        f"mean log-prob/token stego {m[0]:.3f}, genuine {m[1]:.3f}, random {m[2]:.3f} nats",
    ), ratios


def claim_c3(diffs: list[float], est: float, lo: float, hi: float) -> Claim:
    return Claim(
        "C3",
        "stegotexts are less probable than genuine text (detectability; paper-uncertain)",
        "not stated",
        {"mean": round(est, 4), "ci95": [round(lo, 4), round(hi, 4)]},
        est > 0 and lo > 0,
        "mean(genuine − stego) > 0 and bootstrap 95% CI low > 0",
        f"log-prob/token under the encoding model given the key; {len(diffs)} cases",
    )


def claim_c4(
    score: dict[int, float],
    copied: dict[int, float],
    strength: dict[str, float],
    main_copy: dict[str, float],
    chars: int,
) -> Claim:
    """``score``: the judge's mean log-prob/char of each encoder's covers (same secrets, keys and span);
    encoders keyed by training steps (more steps = stronger, checked on held-out text); ``strength``:
    held-out nats/char of the judge and of each encoder; ``copied``/``main_copy``: aligned copying."""
    steps = sorted(score)
    inc = all(score[b] > score[a] for a, b in itertools.pairwise(steps))
    enc = [strength[f"steps{n}"] for n in steps]
    stronger = all(b < a for a, b in itertools.pairwise(enc))
    judge_ok = strength["judge"] <= min(enc)
    return Claim(
        "C4",
        "a stronger model gives better covers",
        "qualitative",
        {f"steps{n}": round(score[n], 3) for n in steps},
        inc and stronger and judge_ok,
        "judge mean log-prob/char of the covers (same secrets, keys, first "
        f"{chars} chars) strictly increasing with encoder strength; encoders strictly stronger with training "
        "steps and the judge at least as strong as the best encoder (held-out nats/char)",
        f"encoders: one tiny char llama run, snapshots after {', '.join(map(str, steps))} steps, held-out "
        + ", ".join(f"{v:.2f}" for v in enc)
        + f" nats/char; judge: char {strength['judge_order']}-gram on text the encoders never saw, "
        f"{strength['judge']:.2f}; aligned copying (runs ≥ {main_copy['min_run']}) "
        + ", ".join(f"{copied[n]:.2f}" for n in steps)
        + f"; main model's covers {main_copy['fraction']:.2f} (longest run {main_copy['longest']})",
    )


def claim_c5(
    right: list[float],
    wrong_word: list[float],
    wrong_key: list[float],
    same_suffix_ngram: list[float] | None,
    model: str = "tiny char llama",
) -> Claim:
    n = len(right)
    k1 = sum(c >= 0.5 for c in wrong_word)
    k2 = sum(c >= 0.5 for c in wrong_key)
    need = math.ceil(0.9 * n)
    holds = all(c == 0 for c in right) and k1 >= need and k2 >= need
    leaks = None if same_suffix_ngram is None else sum(c == 0 for c in same_suffix_ngram)
    return Claim(
        "C5",
        "the model and the prompts are the key",
        "qualitative (protocol)",
        {
            "right_cer_max": round(max(right), 4),
            "last_word_swapped_cer>=0.5": f"{k1}/{n}",
            "other_key_cer>=0.5": f"{k2}/{n}",
        },
        holds,
        f"CER = 0 with the right key; CER ≥ 0.5 in ≥ {need}/{n} cases for both wrong keys ({model})",
        f"median CER: last word swapped {sorted(wrong_word)[n // 2]:.2f}, "
        f"other key {sorted(wrong_key)[n // 2]:.2f}"
        + (
            ""
            if leaks is None
            else f"; short-context contrast: char n-gram with a wrong key ending like the right one decodes "
            f"{leaks}/{len(same_suffix_ngram)} secrets exactly"
        ),
    )


def claim_c6(
    ratio: float, ms_per_token: float, n: int, limit: float = 1.2, model: str = "tiny char LM"
) -> Claim:
    return Claim(
        "C6",
        "encode + decode of an abstract-length message takes seconds",
        "seconds on a laptop (8B)",
        {"vs_forward": round(ratio, 3), "ms_per_token": round(ms_per_token, 2), "tokens": n},
        ratio <= limit,
        f"encode + decode wall time ≤ {limit} × the incremental forward passes they run (same run)",
        f"the rest is ranking and bookkeeping; ms_per_token is machine-dependent ({model}, 1 CPU thread)",
    )
