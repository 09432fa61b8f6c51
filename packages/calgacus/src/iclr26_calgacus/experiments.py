"""The measurements behind claims C1–C6, one function per claim (``reproduce.py`` builds the `Setup`).

Each ``exp_*`` runs the paper's protocol on the miniature's models and returns its `Claim` (verdict from
``claims.py``) and the raw numbers for ``metrics.json``.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from .cases import Case, aligned_copy, char_error_rate, long_secret, replace_last_word
from .claims import claim_c1, claim_c2, claim_c3, claim_c4, claim_c5, claim_c6
from .protocol import CalgacusWarning, decode, encode, random_rank_text
from .ranks import CalgacusError


@dataclass
class Setup:
    """Everything the claims share: config, cases, and the models (built once in ``reproduce.py``)."""

    cfg: Any
    ctx: Any
    cases: list[Case]
    prefix: str
    main: Any  # the tiny char llama, or the user's model at scale=paper
    main_adm: str
    encoders: dict[int, Any]  # char Kneser-Ney n-grams (C1's short-context model, C5's contrast)
    c4_encoders: dict[int, Any]  # C4: tiny char llama snapshots {steps: lm} on the encoders' half of the text
    judge: Any  # C4 judge: a char Kneser-Ney n-gram on the other half
    bpe_lm: Any  # token 3-gram over the byte-level BPE vocabulary
    held_out: str  # held-out text for the models' strength (nats/char)
    metrics: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def short_context_ok():
    """The n-grams' key-secrecy warning is what C4/C5 measure; the report says it once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalgacusWarning)
        yield


@dataclass
class CaseRun:
    """One encode/decode of a case with one model (decoded from the text when it is exact, else the ids)."""

    secret: str
    key: str
    cover: str
    decoded: str | None
    exact: bool
    equal_length: bool
    text_exact: bool
    n_tokens: int
    ranks: list[int] = field(default_factory=list)
    rejected: int = 0
    error: str = ""


def run_case(lm: Any, case: Case, prefix: str, admissible: str, transport: str = "auto") -> CaseRun:
    """``transport``: ``"auto"`` (the text if it re-tokenises exactly, else the ids) or ``"text"``."""
    st = encode(case.secret, case.key, lm, secret_prefix=prefix, admissible=admissible, transport="ids")
    use_text = transport == "text" or st.text_exact
    try:
        dec = decode(
            st.text if use_text else st.ids, case.key, lm, secret_prefix=prefix, admissible=admissible
        )
        err = ""
    except CalgacusError as exc:
        dec, err = None, str(exc)
    n_secret = len(lm.encode_text(case.secret))
    n_cover = len(lm.encode_text(st.text)) if use_text else len(st.ids)
    return CaseRun(
        case.secret, case.key, st.text, dec, dec == case.secret, n_cover == n_secret == st.n_tokens,
        st.text_exact, st.n_tokens, st.ranks, len(st.rejected_steps), err,
    )  # fmt: skip


def _runs(s: Setup, lm: Any, admissible: str, desc: str, transport: str = "auto") -> list[CaseRun]:
    it = s.ctx.progress(s.cases, total=len(s.cases), desc=desc)
    return [run_case(lm, c, s.prefix, admissible, transport) for c in it]


def exp_c1(s: Setup) -> tuple[Any, dict[str, Any], dict[str, list[CaseRun]]]:
    top = max(s.encoders)
    runs = {"main": _runs(s, s.main, s.main_adm, "C1 main model")}
    with short_context_ok():
        runs[f"char{top}gram"] = _runs(s, s.encoders[top], "all", f"C1 char {top}-gram")
        runs["bpe_canonical"] = _runs(s, s.bpe_lm, "canonical", "C1 BPE 3-gram canonical")
        naive = _runs(s, s.bpe_lm, "all", "C1 BPE 3-gram naive", transport="text")
    rate = lambda rs, f: sum(f(r) for r in rs) / len(rs)  # noqa: E731
    exact = {k: rate(v, lambda r: r.exact) for k, v in runs.items()}
    equal = {k: rate(v, lambda r: r.equal_length) for k, v in runs.items()}
    text_exact = {k: rate(v, lambda r: r.text_exact) for k, v in runs.items()}
    naive_fail = rate(naive, lambda r: not r.exact)
    claim = claim_c1(exact, equal, text_exact, naive_fail)
    metrics = {
        "c1_exact": {k: [r.exact for r in v] for k, v in runs.items()},
        "c1_text_exact": {k: [r.text_exact for r in v] for k, v in runs.items()},
        "c1_rejected_steps": {k: [r.rejected for r in v] for k, v in runs.items()},
        "c1_naive_bpe_exact": [r.exact for r in naive],
        "c1_errors": {k: [r.error for r in v if r.error] for k, v in {**runs, "naive": naive}.items()},
        "c1_mean_rank": {
            k: sum(sum(r.ranks) / max(len(r.ranks), 1) for r in v) / len(v) for k, v in runs.items()
        },
    }
    return claim, metrics, runs


def exp_c2_c3(s: Setup, main_runs: list[CaseRun]) -> tuple[Any, Any, dict[str, Any], dict[str, list[float]]]:
    """Log-prob/token under the main model given the key: stegotext, genuine text, random-rank text."""
    from iclr26_core.evaluation import bootstrap_ci

    lm = s.main
    stego, genuine, rand = [], [], []
    pooled: dict[str, list[float]] = {"stego": [], "genuine": [], "random": []}
    pairs = list(zip(s.cases, main_runs))
    for i, (case, r) in enumerate(s.ctx.progress(pairs, total=len(pairs), desc="C2 scores")):
        key_ids = lm.encode_text(case.key)
        n = r.n_tokens
        _, rnd_ids = random_rank_text(lm, case.key, n, seed=s.ctx.seed * 1000 + i)
        texts = (
            ("stego", lm.encode_text(r.cover), stego),
            ("genuine", lm.encode_text(case.genuine)[:n], genuine),
            ("random", rnd_ids, rand),
        )
        for name, ids, acc in texts:
            lps = lm.logprobs(key_ids, ids)
            pooled[name] += lps
            acc.append(sum(lps) / len(lps))
    c2, ratios = claim_c2(stego, genuine, rand)
    diffs = [g - st for st, g in zip(stego, genuine)]
    est, lo, hi = bootstrap_ci(diffs, n_boot=int(s.cfg.n_boot), seed=s.ctx.seed)
    c3 = claim_c3(diffs, est, lo, hi)
    metrics = {"c2_logprob": {"stego": stego, "genuine": genuine, "random": rand, "ratio": ratios}}
    return c2, c3, metrics, pooled


def nats_per_symbol(lm: Any, text: str, block: int = 1024) -> float:
    """Held-out cross-entropy of ``lm`` on ``text`` (nats per token; per character for char models), over
    consecutive blocks of ``block`` tokens (each scored from its first token on, within the model's context)."""
    ids = lm.encode_text(text)
    total, n = 0.0, 0
    for i in range(0, len(ids) - 1, block):
        chunk = ids[i : i + block + 1]
        lps = lm.logprobs(chunk[:1], chunk[1:])
        total, n = total - sum(lps), n + len(lps)
    return total / n


def copying(lm: Any, runs: list[CaseRun], min_run: int) -> dict[str, float]:
    """Aligned verbatim copying of the secret in the covers (token positions), averaged over ``runs``."""
    got = [aligned_copy(lm.encode_text(r.cover), lm.encode_text(r.secret), min_run) for r in runs]
    return {
        "fraction": sum(f for f, _ in got) / max(len(got), 1),
        "longest": max((n for _, n in got), default=0),
        "min_run": min_run,
    }


def exp_c4(s: Setup, main_runs: list[CaseRun]) -> tuple[Any, dict[str, Any]]:
    """Encoders of increasing strength with long context — snapshots of one tiny char llama training run
    (on the encoders' half of the text) after more and more steps — hide the first ``c4_chars`` characters
    of the same secrets under the same keys; a fixed, stronger judge (a char Kneser-Ney n-gram fitted on the
    other half) scores every cover on the same span (the whole cover: equal lengths). Copying of the secret
    is measured as aligned verbatim runs, for the encoders and for the main model's C1 covers."""
    judge, n = s.judge, min(int(s.cfg.c4_cases), len(s.cases))
    chars, min_run = int(s.cfg.c4_chars), int(s.cfg.copy_min_run)
    strength: dict[str, Any] = {"judge": nats_per_symbol(judge, s.held_out), "judge_order": judge.order}
    scores, copied, per_case = {}, {}, {}
    for steps, lm in s.c4_encoders.items():
        strength[f"steps{steps}"] = nats_per_symbol(lm, s.held_out)
        runs, per = [], []
        for case in s.ctx.progress(s.cases[:n], total=n, desc=f"C4 encoder after {steps} steps"):
            secret = case.secret[:chars]
            st = encode(secret, case.key, lm, secret_prefix=s.prefix, admissible="all")
            lps = judge.logprobs(judge.encode_text(case.key), judge.encode_text(st.text))
            per.append(sum(lps) / len(lps))
            runs.append(CaseRun(secret, case.key, st.text, None, False, True, True, st.n_tokens))
        scores[steps], per_case[steps] = sum(per) / len(per), per
        copied[steps] = copying(lm, runs, min_run)["fraction"]
    main_copy = copying(s.main, main_runs, min_run)
    claim = claim_c4(scores, copied, strength, main_copy, chars)
    metrics = {
        "c4_judge": {"score": scores, "copied": copied, "strength": strength, "span_chars": chars},
        "c4_per_case": per_case,
        "main_copying": main_copy,
    }
    return claim, metrics


def exp_c5(s: Setup, main_runs: list[CaseRun], ngram_runs: list[CaseRun]) -> tuple[Any, dict[str, Any]]:
    """Wrong keys on the main (long-context) model; the same-suffix wrong key on the char n-gram."""
    n5 = min(int(s.cfg.c5_cases), len(s.cases))
    right = [char_error_rate(r.decoded or "", r.secret) for r in main_runs[:n5]]
    wrong_word, wrong_key, suffix = [], [], []
    top = s.encoders[max(s.encoders)]
    for i in s.ctx.progress(range(n5), total=n5, desc="C5 wrong keys"):
        r, case = main_runs[i], s.cases[i]
        others = s.cases[i + 1 :] + s.cases[:i]
        other = next((c.key for c in others if c.key != r.key), r.key + " Moreover.")
        for wk, acc in ((replace_last_word(r.key), wrong_word), (other, wrong_key)):
            dec = decode(r.cover, wk, s.main, secret_prefix=s.prefix, admissible=s.main_adm)
            acc.append(char_error_rate(dec, r.secret))
        # a different key that ends in the right key's last order-1 characters
        same_end = "Something else entirely: " + case.key[-top.context_size :] if top.context_size else "X"
        with short_context_ok():
            dec = decode(ngram_runs[i].cover, same_end, top, secret_prefix=s.prefix)
        suffix.append(char_error_rate(dec, case.secret))
    claim = claim_c5(right, wrong_word, wrong_key, suffix)
    metrics = {
        "c5_cer": {"right": right, "last_word": wrong_word, "other_key": wrong_key, "ngram_same_end": suffix}
    }
    return claim, metrics


def exp_c6(s: Setup) -> tuple[Any, dict[str, Any]]:
    """Encode + decode of a ~1,300-character secret; time against the forward passes inside the same run."""
    lm = s.main
    secret = long_secret(int(s.cfg.c6_chars), s.ctx.seed)
    key = s.cases[0].key
    if hasattr(lm, "clear_prompt_cache"):
        lm.clear_prompt_cache()  # time the prompts too
    f0, c0 = getattr(lm, "forward_seconds", 0.0), getattr(lm, "forward_calls", 0)
    t0 = time.perf_counter()
    st = encode(secret, key, lm, secret_prefix=s.prefix, admissible=s.main_adm)
    dec = decode(st.text, key, lm, secret_prefix=s.prefix, admissible=s.main_adm)
    both = time.perf_counter() - t0
    forward = getattr(lm, "forward_seconds", 0.0) - f0
    calls = getattr(lm, "forward_calls", 0) - c0
    ratio = both / forward if forward > 0 else float("inf")
    claim = claim_c6(ratio, 1000 * both / max(st.n_tokens, 1), st.n_tokens)
    if dec != secret:
        claim.note += "; WARNING: the long secret did not round-trip"
    metrics = {
        "c6": {
            "tokens": st.n_tokens,
            "seconds_encode_decode": both,
            "seconds_forward": forward,
            "forward_calls": calls,
            "round_trip": dec == secret,
        }
    }
    return claim, metrics
