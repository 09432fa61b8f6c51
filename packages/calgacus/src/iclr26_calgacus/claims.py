"""The verdicts of claims C1–C6: pure functions from measured numbers to a `Claim` (rules of the spec).

Nothing here measures; ``experiments.py`` does, and passes the raw numbers in.
"""

from __future__ import annotations

import itertools
import math

from iclr26_core.report import Claim


def claim_c1(
    exact: dict[str, float], equal: dict[str, float], text_exact: dict[str, float], naive_fail: float
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
        f"cover text re-tokenises exactly (else the ids are sent): {te}; "
        f"naive BPE (no filter) text round-trip failure rate {naive_fail:.2f}",
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
    own: dict[int, float], full: dict[int, float], copied: dict[int, float], strength: dict[str, float]
) -> Claim:
    """``own``: judge mean log-prob/token of each encoder's covers up to the step where the cover starts
    copying the secret; ``full``: over whole covers; ``copied``: mean copied fraction; ``strength``:
    held-out nats/char of the judge and of each encoder."""
    orders = sorted(own)
    inc = all(own[b] > own[a] for a, b in itertools.pairwise(orders))
    best_encoder = min(strength[f"order{o}"] for o in orders)
    strong = strength["judge"] <= best_encoder
    return Claim(
        "C4",
        "a stronger model gives better covers",
        "qualitative",
        {f"order{o}": round(own[o], 3) for o in orders},
        inc and strong,
        "judge mean log-prob/token of the covers (own part) strictly increasing with n-gram order, and the "
        "judge at least as strong as the best encoder (held-out nats/char)",
        f"judge: char {strength['judge_order']}-gram on text the encoders never saw, "
        f"{strength['judge']:.2f} nats/char vs encoders "
        + ", ".join(f"{strength[f'order{o}']:.2f}" for o in orders)
        + "; copied fraction "
        + ", ".join(f"{copied[o]:.2f}" for o in orders)
        + "; whole covers "
        + ", ".join(f"{full[o]:.2f}" for o in orders),
    )


def claim_c5(
    right: list[float], wrong_word: list[float], wrong_key: list[float], same_suffix_ngram: list[float]
) -> Claim:
    n = len(right)
    k1 = sum(c >= 0.5 for c in wrong_word)
    k2 = sum(c >= 0.5 for c in wrong_key)
    need = math.ceil(0.9 * n)
    holds = all(c == 0 for c in right) and k1 >= need and k2 >= need
    leaks = sum(c == 0 for c in same_suffix_ngram)
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
        f"CER = 0 with the right key; CER ≥ 0.5 in ≥ {need}/{n} cases for both wrong keys (tiny char llama)",
        f"median CER: last word swapped {sorted(wrong_word)[n // 2]:.2f}, "
        f"other key {sorted(wrong_key)[n // 2]:.2f}; short-context contrast: char n-gram with a wrong key "
        f"ending like the right one decodes {leaks}/{len(same_suffix_ngram)} secrets exactly",
    )


def claim_c6(ratio: float, ms_per_token: float, n: int, limit: float = 1.2) -> Claim:
    return Claim(
        "C6",
        "encode + decode of an abstract-length message takes seconds",
        "seconds on a laptop (8B)",
        {"vs_forward": round(ratio, 3), "ms_per_token": round(ms_per_token, 2), "tokens": n},
        ratio <= limit,
        f"encode + decode wall time ≤ {limit} × the incremental forward passes they run (same run)",
        "the rest is ranking and bookkeeping; ms_per_token is machine-dependent (tiny char LM, 1 CPU thread)",
    )
