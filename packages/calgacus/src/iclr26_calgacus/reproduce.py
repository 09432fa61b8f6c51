"""``iclr26-calgacus reproduce``: the paper's claims C1–C6 in miniature.

Setup (spec): 20 held-out pydoc paragraphs as secrets, keys from other held-out topics; the main model is the
package's tiny char-level llama (or ``model`` at scale=paper). C1 also runs a char Kneser–Ney 5-gram and a
token 3-gram over a byte-level BPE vocabulary (``admissible="canonical"``); C4 compares char n-gram encoders
of increasing strength (snapshots of one tiny char llama training run on one half of the training text)
under a fixed, stronger n-gram judge trained on the other half. One function per claim lives in ``experiments.py``; every verdict is computed from the
measured numbers with the rule in ``claims.py``.
"""

from __future__ import annotations

import time
from typing import Any

from iclr26_core.report import Results, fmt

from .experiments import Setup, exp_c1, exp_c2_c3, exp_c4, exp_c5, exp_c6, short_context_ok


class Laps:
    """Logs the time of each stage of one run (one instance per run)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx, self.t = ctx, time.perf_counter()

    def __call__(self, what: str) -> None:
        now = time.perf_counter()
        self.ctx.log(f"{what} done in {now - self.t:.1f} s")
        self.t = now


def _main_lm(cfg: Any, ctx: Any):
    from .resolve import resolve_model
    from .tiny import load_tiny

    lm = resolve_model(str(cfg.model)) if cfg.model else load_tiny(str(cfg.tiny_recipe))
    if hasattr(lm, "to"):
        lm.to(ctx.device)
    return lm


def build(cfg: Any, ctx: Any) -> Setup:
    """Cases, the main model, the C4 encoders and judge (disjoint halves of the training text), the BPE 3-gram."""
    from iclr26_core.corpus import pydoc_dataset
    from iclr26_core.tokenizers import train_bpe

    from .cases import encoder_judge_split, make_cases
    from .ngram import CharNGramLM
    from .tiny import load_tiny_snapshots, tiny_alphabet

    cases = make_cases(
        int(cfg.n_cases), int(cfg.min_chars), int(cfg.max_chars), int(cfg.key_max_chars), ctx.seed
    )
    ctx.log(f"{len(cases)} cases; loading the main model ({cfg.model or 'tiny:' + str(cfg.tiny_recipe)})")
    main = _main_lm(cfg, ctx)
    ds = pydoc_dataset()
    enc_text, judge_text = encoder_judge_split(list(ds["train"]["text"]))
    if cfg.get("ngram_train_chars"):  # smoke: fit the n-grams on a prefix of each half
        cut = int(cfg.ngram_train_chars)
        enc_text, judge_text = ["\n\n".join(enc_text)[:cut]], ["\n\n".join(judge_text)[:cut]]
    alphabet = tiny_alphabet()
    encoders = {int(o): CharNGramLM(int(o), alphabet=alphabet).fit(enc_text) for o in cfg.ngram_orders}
    judge = CharNGramLM(int(cfg.judge_order), alphabet=alphabet, name="judge").fit(judge_text)
    bpe = train_bpe(int(cfg.bpe_vocab))
    bpe_lm = CharNGramLM(int(cfg.bpe_order), tokenizer=bpe, name=f"bpe{cfg.bpe_vocab}-{cfg.bpe_order}gram")
    bpe_lm.fit(list(ds["train"]["text"]) if not cfg.get("ngram_train_chars") else enc_text)
    held_out = "\n\n".join(ds["validation"]["text"])[: int(cfg.held_out_chars)]
    ctx.log(f"C4 encoders: tiny char llama snapshots after {list(cfg.c4_steps)} steps (trained once, cached)")
    c4 = load_tiny_snapshots(enc_text, list(cfg.c4_steps), recipe=str(cfg.c4_recipe))
    for lm in c4.values():
        lm.to(ctx.device)
    ctx.log(
        "note: the n-grams see only their last order-1 symbols, so they do not keep a key secret "
        "(C4 and C5 measure what follows); the main model is long-context"
    )
    return Setup(
        cfg=cfg, ctx=ctx, cases=cases, prefix=str(cfg.secret_prefix), main=main,
        main_adm="all" if main.bijective else "canonical", encoders=encoders, c4_encoders=c4, judge=judge,
        bpe_lm=bpe_lm, held_out=held_out,
    )  # fmt: skip


def run(cfg: Any, ctx: Any) -> Results:
    from .peers import bench, bench_table, peer_status

    if str(cfg.scale.name) == "real":  # the protocol on a real LM (SmolLM2), real secrets, through files
        from .real import run_real

        return run_real(cfg, ctx, _main_lm(cfg, ctx))
    t_start, cpu_start = time.perf_counter(), time.process_time()
    lap = Laps(ctx)
    s = build(cfg, ctx)
    lap("models and data")
    c1, m1, runs = exp_c1(s)
    lap("C1")
    c2, c3, m23, pooled = exp_c2_c3(s, runs["main"])
    lap("C2/C3")
    top = max(s.encoders)
    c4, m4 = exp_c4(s, runs["main"])
    lap("C4")
    c5, m5 = exp_c5(s, runs["main"], runs[f"char{top}gram"])
    lap("C5")
    c6, m6 = exp_c6(s)
    lap("C6")
    k = min(int(cfg.bench_cases), len(s.cases))
    rows = bench(s.main, s.cases[:k], s.prefix, s.main_adm, ctx.progress, "main model")
    gguf = cfg.get("gguf")
    if gguf:
        from .llamacpp import LlamaCppRankLM

        with short_context_ok():
            rows += bench(LlamaCppRankLM(str(gguf)), s.cases[:k], s.prefix, "canonical", ctx.progress, "GGUF")
    table = bench_table(rows)
    _write(ctx, "bench.md", f"# Peers bench ({k} cases, same model, key and secrets)\n\n{table}\n")
    for line in table.splitlines()[2:]:
        ctx.log("bench " + line)
    lap("peers bench")
    figures = [_histogram(ctx, pooled), _examples(ctx, runs["main"][:3])]
    metrics = {
        "main_model": s.main.fingerprint() if hasattr(s.main, "fingerprint") else {"model": str(cfg.model)},
        "admissible_main": s.main_adm,
        "n_cases": len(s.cases),
        **m1, **m23, **m4, **m5, **m6,
        "bench": rows,
        "peers": peer_status(ctx, gguf),
        "wall_seconds": time.perf_counter() - t_start,
        "cpu_seconds": time.process_time() - cpu_start,  # CPU time of this process (contention-free cost)
    }  # fmt: skip
    claims = [c1, c2, c3, c4, c5, c6]
    ctx.log("measured: " + "; ".join(f"{c.id} {fmt(c.measured)}" for c in claims))
    return Results(claims=claims, metrics=metrics, figures=[f for f in figures if f.endswith(".png")])


def _write(ctx: Any, name: str, text: str) -> str:
    from iclr26_core.fs import atomic_write_text

    atomic_write_text(ctx.run_dir / name, text)
    return name


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


def _examples(ctx: Any, runs: list) -> str:
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
    return _write(ctx, "examples.md", "\n".join(lines))
