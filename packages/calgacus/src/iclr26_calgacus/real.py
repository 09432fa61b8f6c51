"""``reproduce scale=real``: the protocol on a real LM (SmolLM2-135M-Instruct, ``model: smollm2``).

Secrets are real paragraphs (``iclr26_core.pretrained.real_text("test")``) cut to ``secret_tokens`` tokens,
plus hostile ones (CR LF, control characters, emoji, a literal special-token string); keys are first
sentences of real paragraphs of the ``calib`` split, whose real continuation is the genuine text. Every
cover goes through a file (``commands.write_exact``, read back as bytes) and is decoded from the file's text
when it re-tokenises exactly, else from its ids. Measured: exact round trips (C1), cover log-prob under the
LM vs real text and random-rank text (C2, C3), the judge's detection rate (the LM without the key, at a
threshold set on ``calib`` text), wrong keys (C5) and seconds per token (C6). Rules are those of scale=cpu.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from iclr26_core.report import Results

from .cases import aligned_copy, char_error_rate, replace_last_word
from .claims import claim_c1, claim_c2, claim_c3, claim_c5, claim_c6
from .commands import _read, write_exact
from .protocol import decode, encode, random_rank_text

HOSTILE = [
    "def f(x):\r\n\treturn x**2  # ok \U0001f44d\U0001f3fd\r\n<|im_end|> \x00\x1b[0m",
    "https://ex.org/p?q=a+b&id=42#x 9f86d081884c7d65 \u041f\u0440\u0438\u0432\u0435\u0442 \u6f22\u5b57\r",
]


@dataclass
class RealCase:
    secret: str
    key: str
    genuine_ids: list[int] = field(default_factory=list)
    hostile: bool = False


def _cut(lm: Any, text: str, n: int) -> str:
    """The first ≤ ``n`` tokens of ``text`` as a string that re-tokenises to exactly those tokens."""
    ids = lm.encode_text(text)[:n]
    while ids and lm.encode_text(lm.decode_ids(ids)) != ids:
        ids = ids[:-1]
    return lm.decode_ids(ids)


def real_cases(lm: Any, n: int, n_tokens: int, key_max: int) -> list[RealCase]:
    """``n`` real secrets (test split) under keys from the calib split, then the hostile secrets."""
    from iclr26_core.pretrained import real_text

    secrets = [p for p in real_text("test") if len(p) >= 4 * n_tokens and not p.startswith(" ")]
    keys = []
    for para in real_text("calib"):
        m = re.match(r"([A-Z][^*>=|\n]{19,}?[.:])\s", para)
        if m and len(m.group(1)) <= key_max and len(para) - m.end() >= 4 * n_tokens:
            keys.append((m.group(1), para[m.end(1) :]))
    step_s, step_k = max(1, len(secrets) // n), max(1, len(keys) // n)
    out = []
    for i in range(n):
        key, rest = keys[i * step_k]
        secret = _cut(lm, secrets[i * step_s], n_tokens)
        out.append(RealCase(secret, key, lm.encode_text(rest)[: len(lm.encode_text(secret))]))
    for i, h in enumerate(HOSTILE):
        out.append(RealCase(h, keys[(n + i) * step_k % len(keys)][0], hostile=True))
    return out


def _through_file(ctx: Any, i: int, st: Any, lm: Any, key: str, prefix: str) -> tuple[str, bool, float]:
    """Write the cover, read its bytes back, decode (from the text if exact, else the ids): (secret, text
    transport used, decode seconds)."""
    from .canonical import normalize

    path = ctx.run_dir / "covers" / f"case{i:02d}.txt"
    path.parent.mkdir(exist_ok=True)
    write_exact(path, st.text)
    written = _read(str(path), "cover")
    exact = written == st.text and lm.encode_text(normalize(written, st.whitespace)) == st.ids
    t0 = time.perf_counter()
    got = decode(written if exact else st.ids, key, lm, secret_prefix=prefix, admissible=st.admissible)
    return got, exact, time.perf_counter() - t0


def _mean(v: list[float]) -> float:
    return sum(v) / max(len(v), 1)


def run_real(cfg: Any, ctx: Any, lm: Any) -> Results:
    from iclr26_core.evaluation import bootstrap_ci
    from iclr26_core.pretrained import real_text

    t_start, cpu_start = time.perf_counter(), time.process_time()
    prefix, adm = str(cfg.secret_prefix), "canonical"
    cases = real_cases(lm, int(cfg.n_cases), int(cfg.secret_tokens), int(cfg.key_max_chars))
    ctx.log(f"{len(cases)} cases ({sum(c.hostile for c in cases)} hostile), {lm.name}")
    rows: list[dict[str, Any]] = []
    f0, c0 = lm.forward_seconds, lm.forward_calls
    for i, c in enumerate(ctx.progress(cases, total=len(cases), desc="encode/decode through files")):
        st = encode(c.secret, c.key, lm, secret_prefix=prefix, admissible=adm, transport="ids")
        got, text_used, dec_s = _through_file(ctx, i, st, lm, c.key, prefix)
        rows.append({
            "hostile": c.hostile, "key": c.key, "secret": c.secret, "cover": st.text, "ids": st.ids,
            "n": st.n_tokens, "exact": got == c.secret, "text_exact": text_used,
            "equal_len": len(st.ids) == len(lm.encode_text(c.secret)), "ranks": st.ranks,
            "rejected_steps": len(st.rejected_steps), "encode_s": st.seconds, "decode_s": dec_s,
            "copy": aligned_copy(st.ids, st.secret_ids, int(cfg.copy_min_run)),
        })  # fmt: skip
    forward_s, calls = lm.forward_seconds - f0, lm.forward_calls - c0
    real = [(c, r) for c, r in zip(cases, rows) if not c.hostile]
    # C2/C3: log-prob/token under the LM given the key; judge: the LM without the key
    stego, genuine, rand, j_cover, j_real = [], [], [], [], []
    for i, (c, r) in enumerate(ctx.progress(real, total=len(real), desc="scores")):
        key_ids = lm.encode_text(c.key)
        _, rnd = random_rank_text(lm, c.key, r["n"], seed=ctx.seed * 1000 + i)
        for ids, acc in ((r["ids"], stego), (c.genuine_ids, genuine), (rnd, rand)):
            acc.append(_mean(lm.logprobs(key_ids, ids)))
        j_cover.append(_mean(lm.logprobs([], r["ids"])))
        j_real.append(_mean(lm.logprobs([], c.genuine_ids)))
    n_tok = int(cfg.secret_tokens)
    calib = [lm.encode_text(p)[:n_tok] for p in real_text("calib")[: int(cfg.judge_calib)]]
    calib_scores = sorted(_mean(lm.logprobs([], ids)) for ids in calib if len(ids) >= n_tok // 2)
    threshold = calib_scores[max(0, math.floor(0.05 * len(calib_scores)))]  # 5 % false positives on calib
    detected = sum(s < threshold for s in j_cover)
    paired = sum(a < b for a, b in zip(j_cover, j_real))
    # C5: wrong keys on the real cases
    right, wrong_word, wrong_key = [], [], []
    for i, (c, r) in enumerate(ctx.progress(real, total=len(real), desc="wrong keys")):
        right.append(0.0 if r["exact"] else char_error_rate(r["secret"], c.secret))
        other = real[(i + 1) % len(real)][0].key
        for wk, acc in ((replace_last_word(c.key), wrong_word), (other, wrong_key)):
            acc.append(
                char_error_rate(decode(r["ids"], wk, lm, secret_prefix=prefix, admissible=adm), c.secret)
            )
    both = sum(r["encode_s"] + r["decode_s"] for r in rows)
    tokens = sum(r["n"] for r in rows)
    rate = lambda k: _mean([float(r[k]) for r in rows])  # noqa: E731
    c1 = claim_c1(
        {"main": rate("exact")}, {"main": rate("equal_len")}, {"main": rate("text_exact")}, None,
        transport=f"through files, {len(rows)} covers ({len(HOSTILE)} hostile); decoded from the text file",
    )  # fmt: skip
    c1.note += (
        f"; aligned copying of the secret (runs ≥ {int(cfg.copy_min_run)} tokens) "
        f"{_mean([r['copy'][0] for r in rows]):.2f}, longest run {max(r['copy'][1] for r in rows)} tokens"
    )
    c2, ratios = claim_c2(stego, genuine, rand)
    diffs = [g - s for s, g in zip(stego, genuine)]
    est, lo, hi = bootstrap_ci(diffs, n_boot=int(cfg.n_boot), seed=ctx.seed)
    c3 = claim_c3(diffs, est, lo, hi)
    ppl = {k: math.exp(-_mean(v)) for k, v in (("cover", stego), ("real", genuine), ("random", rand))}
    c3.note += (
        f"; perplexity cover {ppl['cover']:.1f} vs real {ppl['real']:.1f} vs random-rank {ppl['random']:.0f}; "
        f"judge (the LM without the key) flags {detected}/{len(real)} covers at 5 % false positives on "
        f"{len(calib_scores)} calib texts, rates the cover below its real text in {paired}/{len(real)} pairs"
    )
    c5 = claim_c5(right, wrong_word, wrong_key, None, model="SmolLM2-135M-Instruct")
    c6 = claim_c6(both / forward_s, 1000 * both / tokens, tokens, model="SmolLM2-135M-Instruct")
    c6.note += f"; encode {sum(r['encode_s'] for r in rows) / tokens:.2f} s/token, decode " + (
        f"{sum(r['decode_s'] for r in rows) / tokens:.2f} s/token ({calls} forward calls)"
    )
    _examples(ctx, rows[: int(cfg.n_examples)] + [r for r in rows if r["hostile"]][:1])
    metrics = {
        "main_model": lm.fingerprint(), "rows": rows, "c2_logprob": {"stego": stego, "genuine": genuine,
        "random": rand, "ratio": ratios}, "perplexity": ppl, "judge": {"cover": j_cover, "real": j_real,
        "threshold": threshold, "calib": calib_scores, "detected": detected, "paired": paired},
        "c5_cer": {"right": right, "last_word": wrong_word, "other_key": wrong_key},
        "seconds": {"encode_decode": both, "forward": forward_s, "forward_calls": calls, "tokens": tokens},
        "wall_seconds": time.perf_counter() - t_start, "cpu_seconds": time.process_time() - cpu_start,
    }  # fmt: skip
    return Results(claims=[c1, c2, c3, c5, c6], metrics=metrics, figures=[])


def _examples(ctx: Any, rows: list[dict[str, Any]]) -> None:
    from iclr26_core.fs import atomic_write_text

    lines = ["# Calgacus on SmolLM2-135M-Instruct: examples", ""]
    for i, r in enumerate(rows, 1):
        lines += [
            f"## Example {i}{' (hostile secret)' if r['hostile'] else ''}", "", f"**key:** {r['key']!r}", "",
            f"**secret ({r['n']} tokens):** {r['secret']!r}", "", f"**cover:** {r['cover']!r}", "",
            f"exact through the file: {r['exact']} (text transport: {r['text_exact']}); "
            f"secret ranks: {r['ranks']}", "",
        ]  # fmt: skip
    atomic_write_text(ctx.run_dir / "examples.md", "\n".join(lines))
