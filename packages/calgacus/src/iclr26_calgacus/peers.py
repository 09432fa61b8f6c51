"""Peers compared side by side (spec, Peers).

* **Arithmetic coding** (in-package, ``arithmetic.py``; Ziegler et al. 2019): runs in every ``reproduce`` on
  the same model and the first ``bench_cases`` secrets (UTF-8 bytes): cover tokens per secret token, payload
  bits per cover token, cover log-prob, exact recovery, time — beside Calgacus on the same cases.
* ``llama-cpp-python`` — the official notebook's backend: `LlamaCppRankLM` runs Calgacus on a GGUF file;
  benched when ``gguf=/path/model.gguf`` is given (the miniature has none).
* ``innocuous`` — LLM steganography on llama.cpp generations (hides bytes, variable length): probed only;
  it needs a GGUF model too.

Calgacus maps text to text of equal token length and is not distribution-preserving; arithmetic coding
hides bits in variable-length, near-distribution-preserving covers.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from .arithmetic import ac_decode, ac_encode
from .protocol import decode, encode


def _probe(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def peer_status(ctx: Any, gguf: str | None) -> list[dict[str, Any]]:
    """One row per optional peer library: installed or not, and whether it ran."""
    rows = []
    missing = []
    for name, module in (("llama-cpp-python", "llama_cpp"), ("innocuous", "innocuous")):
        if not _probe(module):
            missing.append(name)
            status = "not installed"
        elif not gguf:
            status = "installed; needs a GGUF model (gguf=/path/model.gguf): not run"
        else:
            status = "installed; run" if module == "llama_cpp" else "installed; not benched (GGUF CLI peer)"
        rows.append({"peer": name, "status": status})
    if missing:
        ctx.peers_missing(missing)
    return rows


def _row(method: str, n_secret: list[int], n_cover: list[int], bits: list[int], lp: list[float], ok: list[bool], secs: list[float]):  # fmt: skip
    k = len(ok)
    return {
        "method": method,
        "cover_tokens_per_secret_token": sum(c / s for c, s in zip(n_cover, n_secret)) / k,
        "bits_per_cover_token": sum(b / c for b, c in zip(bits, n_cover)) / k,
        "cover_logprob": sum(lp) / k,
        "exact": sum(ok) / k,
        "seconds": sum(secs) / k,
        "equal_length": all(c == s for c, s in zip(n_cover, n_secret)),
    }


def bench(
    lm: Any, cases: list, prefix: str, admissible: str, progress: Any, label: str
) -> list[dict[str, Any]]:
    """Calgacus and arithmetic coding on the same secrets, key and model."""
    cal = {"n_s": [], "n_c": [], "bits": [], "lp": [], "ok": [], "t": []}
    ac = {"n_s": [], "n_c": [], "bits": [], "lp": [], "ok": [], "t": []}
    for case in progress(cases, total=len(cases), desc=f"peers bench ({label})"):
        n_secret = len(lm.encode_text(case.secret))
        bits = 8 * len(case.secret.encode("utf-8"))
        t0 = time.perf_counter()
        st = encode(case.secret, case.key, lm, secret_prefix=prefix, admissible=admissible, transport="ids")
        back = decode(st, case.key, lm, secret_prefix=prefix)
        for d, v in zip(cal.values(), (n_secret, st.n_tokens, bits, st.cover_logprob, back == case.secret)):
            d.append(v)
        cal["t"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        a = ac_encode(case.secret.encode("utf-8"), case.key, lm)
        ok = ac_decode(a.ids, case.key, lm) == case.secret.encode("utf-8")
        for d, v in zip(ac.values(), (n_secret, a.n_tokens, bits, a.cover_logprob, ok)):
            d.append(v)
        ac["t"].append(time.perf_counter() - t0)
    return [
        _row(f"calgacus ({label})", *cal.values()),
        _row(f"arithmetic coding ({label})", *ac.values()),
    ]


def bench_table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| method | cover tokens / secret token | payload bits / cover token | cover log-prob (nats/token) "
        "| exact | s per secret (encode + decode) |\n| --- | --- | --- | --- | --- | --- |"
    )
    body = [
        f"| {r['method']} | {r['cover_tokens_per_secret_token']:.2f} | {r['bits_per_cover_token']:.2f} | "
        f"{r['cover_logprob']:.3f} | {r['exact']:.2f} | {r['seconds']:.2f} |"
        for r in rows
    ]
    return "\n".join([head, *body])
