"""``iclr26-calgacus reproduce``: the paper's claims C1–C6 in miniature (one function per claim).

Setup (spec): 20 held-out pydoc paragraphs as secrets, keys from other held-out topics; the main model is the
package's tiny char-level llama (or ``model`` at scale=paper), plus char Kneser–Ney n-grams and a
token 3-gram over a byte-level BPE vocabulary (``admissible="canonical"``). Every verdict is computed from
the measured numbers with the rule in the spec.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

from iclr26_core.report import Claim, Results, fmt

from .cases import Case, char_error_rate, long_secret, make_cases, replace_last_word
from .protocol import decode, encode, random_rank_text


@dataclass
class CaseRun:
    """One encode/decode of a case with one model."""

    secret: str
    key: str
    cover: str
    decoded: str | None
    exact: bool
    equal_length: bool
    n_tokens: int
    ranks: list[int] = field(default_factory=list)
    error: str = ""


def _run_case(lm: Any, case: Case, prefix: str, admissible: str) -> CaseRun:
    from .ranks import CalgacusError

    try:
        st = encode(case.secret, case.key, lm, secret_prefix=prefix, admissible=admissible, transport="ids")
    except CalgacusError as exc:
        return CaseRun(case.secret, case.key, "", None, False, False, 0, error=str(exc))
    try:
        dec = decode(st.text, case.key, lm, secret_prefix=prefix, admissible=admissible)
    except CalgacusError as exc:
        dec, err = None, str(exc)
    else:
        err = ""
    eq = len(lm.encode_text(st.text)) == len(lm.encode_text(case.secret))
    return CaseRun(case.secret, case.key, st.text, dec, dec == case.secret, eq, st.n_tokens, st.ranks, err)


def _runs(ctx: Any, lm: Any, cases: list[Case], prefix: str, admissible: str, desc: str) -> list[CaseRun]:
    return [_run_case(lm, c, prefix, admissible) for c in ctx.progress(cases, total=len(cases), desc=desc)]


def claim_c1(results: dict[str, list[CaseRun]], naive: list[CaseRun]) -> Claim:
    exact = {k: sum(r.exact for r in v) / len(v) for k, v in results.items()}
    equal = {k: sum(r.equal_length for r in v) / len(v) for k, v in results.items()}
    naive_fail = sum(not r.exact for r in naive) / len(naive)
    holds = all(v == 1.0 for v in exact.values()) and all(v == 1.0 for v in equal.values())
    return Claim(
        "C1",
        "a text hides in another text of the same token length and is recovered",
        "qualitative",
        {"exact": exact, "equal_len": equal},
        holds,
        "exact-match rate = 1 and equal token length = 1 for every model",
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


def claim_c3(stego: list[float], genuine: list[float], n_boot: int, seed: int) -> Claim:
    from iclr26_core.evaluation import bootstrap_ci

    diffs = [g - s for s, g in zip(stego, genuine)]
    est, lo, hi = bootstrap_ci(diffs, n_boot=n_boot, seed=seed)
    return Claim(
        "C3",
        "stegotexts are less probable than genuine text (detectability; paper-uncertain)",
        "not stated",
        {"mean": round(est, 4), "ci95": [round(lo, 4), round(hi, 4)]},
        est > 0 and lo > 0,
        "mean(genuine − stego) > 0 and bootstrap 95% CI low > 0",
        "log-prob/token under the encoding model given the key",
    )


def claim_c4(judge_means: dict[int, float]) -> Claim:
    orders = sorted(judge_means)
    vals = [judge_means[o] for o in orders]
    inc = all(b > a for a, b in itertools.pairwise(vals))
    return Claim(
        "C4",
        "a stronger model gives better covers",
        "qualitative",
        {f"order{o}": round(judge_means[o], 4) for o in orders},
        inc,
        "judge (tiny char LM) mean log-prob/token of covers strictly increasing with n-gram order",
        "encoders: char Kneser–Ney n-grams",
    )


def claim_c5(right: list[float], wrong_word: list[float], wrong_key: list[float]) -> Claim:
    n = len(right)
    k1 = sum(c >= 0.5 for c in wrong_word)
    k2 = sum(c >= 0.5 for c in wrong_key)
    need = math.ceil(0.9 * n)
    holds = all(c == 0 for c in right) and k1 >= need and k2 >= need
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
        f"CER = 0 with the right key; CER ≥ 0.5 in ≥ {need}/{n} cases for both wrong keys",
        f"median CER: last word swapped {sorted(wrong_word)[n // 2]:.2f}, "
        f"other key {sorted(wrong_key)[n // 2]:.2f}",
    )


def claim_c6(ms_per_token: float, ratio: float, n: int) -> Claim:
    return Claim(
        "C6",
        "encode + decode of an abstract-length message takes seconds",
        "seconds on a laptop (8B)",
        {"ms_per_token": round(ms_per_token, 3), "vs_bare_forward": round(ratio, 3), "tokens": n},
        ms_per_token < 20.0,
        "encode + decode wall time < 20 ms per token (tiny char LM, CPU)",
        "vs_bare_forward: time / (same number of bare incremental forward steps)",
    )


def _bare_step_seconds(lm: Any, ids: list[int], steps: int) -> float:
    """Seconds per bare incremental forward step (the same KV-cache session, no ranking)."""
    sess = lm.session(ids[:1])
    t0 = time.perf_counter()
    for i in range(steps):
        sess.append(ids[(i + 1) % len(ids)])
        sess.logits()
    return (time.perf_counter() - t0) / steps


def _main_lm(cfg: Any, ctx: Any):
    from .hf import resolve_model
    from .tiny import load_tiny

    tiny = load_tiny(str(cfg.tiny_recipe))
    tiny.to(ctx.device)
    main = tiny if not cfg.model else resolve_model(str(cfg.model))
    if main is not tiny and hasattr(main, "to"):
        main.to(ctx.device)
    return tiny, main


_T = [0.0]


def _lap(ctx: Any, what: str) -> None:
    now = time.perf_counter()
    ctx.log(f"{what} done in {now - _T[0]:.1f} s")
    _T[0] = now


def run(cfg: Any, ctx: Any) -> Results:
    from iclr26_core.corpus import pydoc_dataset
    from iclr26_core.tokenizers import train_bpe

    from .ngram import CharNGramLM
    from .peers import peer_rows
    from .tiny import tiny_alphabet

    sc, prefix = cfg, str(cfg.secret_prefix)  # the scale sets top-level keys
    t_start = _T[0] = time.perf_counter()
    cpu_start = time.process_time()
    cases = make_cases(int(sc.n_cases), int(sc.min_chars), int(sc.max_chars), int(sc.key_max_chars), ctx.seed)
    ctx.log(f"{len(cases)} cases; loading/training the tiny char LM ({sc.tiny_recipe})")
    tiny, main = _main_lm(cfg, ctx)
    main_adm = "all" if main.bijective else "canonical"
    _lap(ctx, "model")
    train_text = pydoc_dataset()["train"]["text"]
    if sc.get("ngram_train_chars"):  # smoke: fit the n-grams on a prefix of the training text
        train_text = ["\n\n".join(train_text)[: int(sc.ngram_train_chars)]]
    alphabet = tiny_alphabet()
    ngrams = {int(o): CharNGramLM(int(o), alphabet=alphabet).fit(train_text) for o in sc.ngram_orders}
    top = max(ngrams)
    bpe = train_bpe(int(sc.bpe_vocab))
    bpe_lm = CharNGramLM(int(sc.bpe_order), tokenizer=bpe, name=f"bpe{sc.bpe_vocab}-{sc.bpe_order}gram")
    bpe_lm.fit(train_text)
    _lap(ctx, "n-grams + BPE")

    # C1: round trips with three models, and the naive BPE transport
    runs = {"main": _runs(ctx, main, cases, prefix, main_adm, "C1 main model")}
    runs[f"char{top}gram"] = _runs(ctx, ngrams[top], cases, prefix, "all", f"C1 char {top}-gram")
    runs["bpe_canonical"] = _runs(ctx, bpe_lm, cases, prefix, "canonical", "C1 BPE 3-gram canonical")
    naive = _runs(ctx, bpe_lm, cases, prefix, "all", "C1 BPE 3-gram naive")
    c1 = claim_c1(runs, naive)
    _lap(ctx, "C1")

    # C2/C3: log-prob per token under the main model given the key: stego, genuine, random ranks
    stego, genuine, rand, pooled = [], [], [], {"stego": [], "genuine": [], "random": []}
    for i, (case, r) in enumerate(
        ctx.progress(list(zip(cases, runs["main"])), total=len(cases), desc="C2 scores")
    ):
        key_ids = main.encode_text(case.key)
        n = r.n_tokens
        g_ids = main.encode_text(case.genuine)[:n]
        _, rnd_ids = random_rank_text(main, case.key, n, seed=ctx.seed * 1000 + i)
        for name, ids, acc in (
            ("stego", main.encode_text(r.cover), stego),
            ("genuine", g_ids, genuine),
            ("random", rnd_ids, rand),
        ):
            lps = main.logprobs(key_ids, ids)
            pooled[name] += lps
            acc.append(sum(lps) / len(lps))
    c2, ratios = claim_c2(stego, genuine, rand)
    c3 = claim_c3(stego, genuine, int(sc.n_boot), ctx.seed)
    _lap(ctx, "C2/C3")

    # C4: covers from n-gram encoders of increasing order, judged by the tiny char LM
    judge = {}
    for o, lm in ngrams.items():
        covers = (
            [r.cover for r in runs[f"char{top}gram"]]
            if o == top
            else [
                encode(c.secret, c.key, lm, secret_prefix=prefix).text
                for c in ctx.progress(cases, total=len(cases), desc=f"C4 char {o}-gram")
            ]
        )
        scores = [
            sum(lp) / len(lp)
            for lp in (
                tiny.logprobs(tiny.encode_text(c.key), tiny.encode_text(cov)) for c, cov in zip(cases, covers)
            )
        ]
        judge[o] = sum(scores) / len(scores)
    c4 = claim_c4(judge)
    _lap(ctx, "C4")

    # C5: wrong keys
    n5 = min(int(sc.c5_cases), len(cases))
    right = [char_error_rate(r.decoded or "", r.secret) for r in runs["main"][:n5]]
    wrong_word, wrong_key = [], []
    for i in ctx.progress(range(n5), total=n5, desc="C5 wrong keys"):
        r = runs["main"][i]
        other = next((c.key for c in cases[i + 1 :] + cases[:i] if c.key != r.key), r.key + " Moreover.")
        for wk, acc in ((replace_last_word(r.key), wrong_word), (other, wrong_key)):
            dec = decode(r.cover, wk, main, secret_prefix=prefix, admissible=main_adm)
            acc.append(char_error_rate(dec, r.secret))
    c5 = claim_c5(right, wrong_word, wrong_key)
    _lap(ctx, "C5")

    # C6: speed on a ~1,300-character secret, and the cost relative to bare forward steps
    secret = long_secret(int(sc.c6_chars), ctx.seed)
    if hasattr(main, "clear_prompt_cache"):
        main.clear_prompt_cache()  # time the prompts too
    t0 = time.perf_counter()
    st = encode(secret, cases[0].key, main, secret_prefix=prefix, admissible=main_adm)
    dec = decode(st.text, cases[0].key, main, secret_prefix=prefix, admissible=main_adm)
    both = time.perf_counter() - t0
    bare = _bare_step_seconds(main, st.secret_ids, int(sc.bare_steps))
    ratio = both / (2 * st.steps * bare)
    c6 = claim_c6(1000 * both / max(st.n_tokens, 1), ratio, st.n_tokens)
    if dec != secret:
        c6.note += "; WARNING: the long secret did not round-trip"

    figures = [_histogram(ctx, pooled), _examples(ctx, runs["main"][:3])]
    metrics = {
        "main_model": main.fingerprint(),
        "admissible_main": main_adm,
        "n_cases": len(cases),
        "c1_exact": {k: [r.exact for r in v] for k, v in runs.items()},
        "c1_naive_bpe_exact": [r.exact for r in naive],
        "c1_errors": {k: [r.error for r in v if r.error] for k, v in {**runs, "naive": naive}.items()},
        "c1_mean_rank": {
            k: sum(sum(r.ranks) / max(len(r.ranks), 1) for r in v) / len(v) for k, v in runs.items()
        },
        "c2_logprob": {"stego": stego, "genuine": genuine, "random": rand, "ratio": ratios},
        "c4_judge_means": judge,
        "c5_cer": {"right": right, "last_word": wrong_word, "other_key": wrong_key},
        "c6": {
            "tokens": st.n_tokens,
            "seconds_encode_decode": both,
            "bare_step_seconds": bare,
            "steps_each_way": st.steps,
            "round_trip": dec == secret,
        },
        "peers": peer_rows(ctx, main, cases, prefix),
        "wall_seconds": time.perf_counter() - t_start,
        "cpu_seconds": time.process_time() - cpu_start,  # CPU time of this process (contention-free cost)
    }
    claims = [c1, c2, c3, c4, c5, c6]
    ctx.log("measured: " + "; ".join(f"{c.id} {fmt(c.measured)}" for c in claims))
    return Results(claims=claims, metrics=metrics, figures=[f for f in figures if f.endswith(".png")])


def _histogram(ctx: Any, pooled: dict[str, list[float]]) -> str:
    from iclr26_core.report import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    lo = min(min(v) for v in pooled.values() if v)
    bins = [lo + (0 - lo) * i / 40 for i in range(41)]
    for name, vals in pooled.items():
        ax.hist(vals, bins=bins, alpha=0.5, density=True, label=f"{name} (mean {sum(vals) / len(vals):.2f})")
    ax.set_xlabel("log p(token | key, preceding tokens) [nats]")
    ax.set_ylabel("density")
    ax.set_title("Per-token log-probability under the encoding model")
    ax.legend()
    return save_figure(fig, ctx.run_dir / "logprob_hist.png")


def _examples(ctx: Any, runs: list[CaseRun]) -> str:
    from iclr26_core.fs import atomic_write_text

    lines = ["# Calgacus examples (main model)", ""]
    for i, r in enumerate(runs, 1):
        lines += [
            f"## Case {i}",
            "",
            f"**key:** {r.key!r}",
            "",
            "**secret:**",
            "",
            "```",
            r.secret,
            "```",
            "",
            f"**stegotext ({r.n_tokens} tokens):**",
            "",
            "```",
            r.cover,
            "```",
            "",
            f"**decoded:** exact = {r.exact}",
            "",
            f"**secret ranks (first 40):** {r.ranks[:40]}",
            "",
        ]
    atomic_write_text(ctx.run_dir / "examples.md", "\n".join(lines))
    return "examples.md"
