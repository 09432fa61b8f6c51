"""The side-by-side bench of ``reproduce``: our codebooks, affine int4 and the installed peers on the same tensors.

Tensors: N(0,1) weights, the contaminated Gaussian of C5, and every Linear weight of the C6 model.
Writes ``bench.md`` into the run directory; peers that are not installed are listed as unavailable.
"""

from __future__ import annotations

from typing import Any

import torch

from iclr26_core.report import fmt

from .peers import MODULES, PEERS, bench, installed, probe


def bench_table(rows: list[dict]) -> str:
    lines = [
        "| method | tensor | MSE | MAE | bits/weight | seconds | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = [
            r["method"],
            r["tensor"] or "-",
            r["mse"],
            r["mae"],
            r["bits_per_weight"],
            r["seconds"],
            r["note"],
        ]
        lines.append("| " + " | ".join("-" if c is None else fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def maybe_bench(cfg: Any, ctx: Any, model: Any = None) -> list[dict] | None:
    """Run the bench when ``cfg.bench`` is true (peers that are not installed get an "unavailable" row and
    one line "peers not installed: ..."; a peer failing on a tensor one line per peer)."""
    from .reproduce import BENCH, contaminated_gaussian

    if not cfg.bench:
        return None
    ctx.peers_missing(MODULES[name].replace(".", "-") for name in PEERS if not installed(name))
    reasons = {name: probe(name)[1] for name in PEERS if installed(name)}
    available = [name for name, reason in reasons.items() if not reason]
    for name, reason in reasons.items():
        if reason:  # installed, but it does not import or has no CPU backend
            ctx.log(f"bench: peer {name} unavailable: {reason}")
    gen = torch.Generator().manual_seed(cfg.seed + BENCH)
    n = int(cfg.bench_samples)
    tensors = {
        "gaussian": torch.randn(n, generator=gen),
        "contaminated": contaminated_gaussian(n, float(cfg.opq.p_outlier), float(cfg.opq.factor), gen),
    }
    if model is not None:
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear):
                tensors[name] = module.weight.detach().float().cpu()
    rows = bench(tensors, block_size=64)
    failed: dict[str, list[dict]] = {}
    for r in rows:
        if r["note"].startswith("failed"):
            failed.setdefault(r["method"], []).append(r)
    for name, bad in failed.items():
        first = f"{bad[0]['tensor']}: {bad[0]['note'].removeprefix('failed: ')}"
        ctx.log(f"bench: peer {name} failed on {len(bad)} of {len(tensors)} tensors (first, {first})")
    (ctx.run_dir / "bench.md").write_text(
        f"# Bench at block size 64 (peers installed: {', '.join(available) or 'none'})\n\n{bench_table(rows)}\n"
    )
    return rows
