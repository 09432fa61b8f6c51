"""The side-by-side bench, summarised: one row per method, the per-tensor rows in a CSV beside it.

``reproduce`` (``bench=true``) runs it on N(0,1) weights, the contaminated Gaussian of C5 and every Linear of
the C6 model; the ``bench`` verb on every Linear of a user's model. Methods: our codebooks (+ BOF4-S with OPQ),
an in-package affine int4 and the installed peers (:mod:`.peers`), all on the same tensors at the same block
size. The summary gives, per method and tensor group, the MSE and MAE relative to our NF4 on the same tensors
(pooled: Σ squared errors / Σ NF4's squared errors, so larger tensors weigh more), the stored bits per weight
and the seconds of quantise + dequantise; and how often our NF4 codes equal bitsandbytes' (same float32 tensor,
float32 scales).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from typing import Any

import torch

from iclr26_core.report import fmt

from .peers import MODULES, PEERS, bench, installed, probe

CSV_FIELDS = ("group", "tensor", "method", "numel", "mse", "mae", "bits_per_weight", "seconds", "note")
NOTES = {
    "nf4": "float16 absmax",
    "af4": "block size 64 only",
    "bof4s-mse": "signed absmax",
    "bof4s-mae": "signed absmax",
    "bof4s-mse+opq": "outliers kept in bfloat16",
    "affine-int4": "in-package min/max, float16 scale+min",
    "bitsandbytes-nf4": "float32 absmax",
    "torchao-nf4": "bfloat16 input, double-quantised scalers",
    "hqq-int4": "optimised zero and scale",
    "quanto-int4": "min/max scale and shift",
}


def nf4_code_agreement(weight: torch.Tensor, block_size: int) -> tuple[int, int]:
    """``(equal codes, weights)``: our NF4 codes vs ``bitsandbytes.functional.quantize_4bit`` on ``weight``.

    Both on the same float32 tensor with float32 absmax scales (bitsandbytes' own); only values that sit
    within float rounding of a threshold can differ.
    """
    from bitsandbytes.functional import quantize_4bit

    from .quantizer import quantize

    w = weight.detach().float().contiguous().cpu()
    packed, _ = quantize_4bit(w, blocksize=block_size, quant_type="nf4")
    flat = packed.reshape(-1)
    theirs = torch.stack([flat >> 4, flat & 15], dim=1).reshape(-1)[: w.numel()]
    ours = quantize(w, "nf4", block_size, scale_dtype="float32").unpacked_codes().reshape(-1)[: w.numel()]
    return int((ours.long() == theirs.long()).sum()), w.numel()


def summarise(rows: list[dict], group_of: dict[str, str]) -> list[dict]:
    """One summary row per method: ``{"method", "groups": {group: {"mse_rel", "mae_rel", "tensors"}},
    "bits_per_weight", "seconds", "failed", "note"}`` (ratios against ``nf4`` on the same tensors)."""
    nf4 = {r["tensor"]: r for r in rows if r["method"] == "nf4" and r["mse"] is not None}
    order: list[str] = []
    acc: dict[str, dict[str, Any]] = {}
    for r in rows:
        m = r["method"]
        if m not in acc:
            order.append(m)
            acc[m] = {"groups": {}, "bits": 0.0, "numel": 0, "seconds": 0.0, "failed": 0, "note": ""}
        a = acc[m]
        if r["tensor"] is None:  # a peer that is not available at all
            a["note"] = r["note"]
            continue
        if r["mse"] is None:
            a["failed"] += 1
            a["first_failure"] = a.get("first_failure") or r["note"].removeprefix("failed: ")
            continue
        ref = nf4.get(r["tensor"])
        g = a["groups"].setdefault(group_of.get(r["tensor"], "other"), [0.0, 0.0, 0.0, 0.0, 0])
        if ref is not None:
            n = r["numel"]
            g[0] += r["mse"] * n
            g[1] += ref["mse"] * n
            g[2] += r["mae"] * n
            g[3] += ref["mae"] * n
            g[4] += 1
        a["bits"] += r["bits_per_weight"] * r["numel"]
        a["numel"] += r["numel"]
        a["seconds"] += r["seconds"]
    out = []
    for m in order:
        a = acc[m]
        note = a["note"] or NOTES.get(m, "")
        if a["failed"]:
            note = f"{note}; failed on {a['failed']} tensors ({a['first_failure'][:60]})".lstrip("; ")
        out.append(
            {
                "method": m,
                "groups": {
                    grp: {"mse_rel": g[0] / g[1], "mae_rel": g[2] / g[3], "tensors": g[4]}
                    for grp, g in a["groups"].items()
                    if g[1] > 0
                },
                "bits_per_weight": a["bits"] / a["numel"] if a["numel"] else None,
                "seconds": a["seconds"] if a["numel"] else None,
                "failed": a["failed"],
                "note": note,
            }
        )
    return out


def summary_table(summary: list[dict], groups: list[str]) -> str:
    """The markdown table of :func:`summarise`: MSE/NF4 and MAE/NF4 per group, bits/weight, seconds, note."""
    head = ["method", *[f"MSE/NF4 {g}" for g in groups], *[f"MAE/NF4 {g}" for g in groups]]
    head += ["bits/weight", "seconds", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for s in summary:
        cells: list[Any] = [s["method"]]
        for key in ("mse_rel", "mae_rel"):
            cells += [s["groups"].get(g, {}).get(key) for g in groups]
        cells += [s["bits_per_weight"], s["seconds"], s["note"]]
        lines.append("| " + " | ".join("-" if c is None else fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def rows_csv(rows: list[dict], group_of: dict[str, str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({"group": group_of.get(r["tensor"], ""), **{k: r.get(k) for k in CSV_FIELDS[1:]}})
    return buf.getvalue()


def peer_status() -> tuple[list[str], dict[str, str], list[str]]:
    """``(missing distributions, {installed peer: reason it cannot run or ""}, runnable peers)``."""
    missing = [MODULES[name].replace(".", "-") for name in PEERS if not installed(name)]
    reasons = {name: probe(name)[1] for name in PEERS if installed(name)}
    return missing, reasons, [name for name, reason in reasons.items() if not reason]


def run_bench(
    tensors: Iterable[tuple[str, str, torch.Tensor]],
    block_size: int = 64,
    opq_q: float | None = 0.95,
    peers: tuple[str, ...] = tuple(PEERS),
    progress: Callable[[Iterable], Iterable] = lambda it: it,
) -> dict[str, Any]:
    """Bench ``(group, name, tensor)`` triples (consumed once) → ``{"rows", "summary", "groups", "group_of",
    "agreement"}``; ``agreement`` is ``None`` without a working bitsandbytes."""
    group_of: dict[str, str] = {}
    groups: list[str] = []
    agree = [0, 0, 0]  # equal codes, weights, tensors
    check_codes = "bitsandbytes-nf4" in peers and not probe("bitsandbytes-nf4")[1]

    def pairs():
        for group, name, w in progress(tensors):
            group_of[name] = group
            if group not in groups:
                groups.append(group)
            yield name, w

    def on_tensor(name: str, w: torch.Tensor) -> None:
        if check_codes:
            a, n = nf4_code_agreement(w, block_size)
            agree[0] += a
            agree[1] += n
            agree[2] += 1

    rows = bench(pairs(), block_size=block_size, opq_q=opq_q, peers=peers, on_tensor=on_tensor)
    agreement = None
    if agree[1]:
        agreement = {
            "equal": agree[0],
            "weights": agree[1],
            "tensors": agree[2],
            "fraction": agree[0] / agree[1],
        }
    return {
        "rows": rows,
        "summary": summarise(rows, group_of),
        "groups": groups,
        "group_of": group_of,
        "agreement": agreement,
    }


def agreement_line(ag: dict[str, Any] | None) -> str:
    """One line: how often our NF4 codes equal bitsandbytes' (or why it was not measured)."""
    if ag is None:
        return "NF4 code agreement with bitsandbytes: not measured (bitsandbytes not available)."
    return (
        f"NF4 codes equal to bitsandbytes' on {ag['fraction']:.4%} of {ag['weights']:,} weights "
        f"({ag['tensors']} tensors; float32 scales, the rest are values within rounding of a threshold)."
    )


def bench_markdown(result: dict[str, Any], block_size: int, what: str, versions: dict[str, str]) -> str:
    """``bench.md``: what was benched, the summary table, the bitsandbytes code agreement, peer versions."""
    lines = [
        f"# Bench at block size {block_size}",
        "",
        f"{what} MSE and MAE relative to our NF4 on the same tensors, pooled over each group (below 1: lower "
        "error than NF4); bits/weight counts codes, scales and outliers (what is stored); seconds: quantise + "
        "dequantise of every tensor. One row per tensor and method: `bench.csv`.",
        "",
        summary_table(result["summary"], result["groups"]),
        "",
    ]
    lines.append(agreement_line(result["agreement"]))
    if versions:
        lines.append("Peers: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    return "\n".join(lines) + "\n"


def peer_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PEERS:
        dist = MODULES[name].replace(".", "-")
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            continue
    return out


def write_bench(out_dir: Any, result: dict[str, Any], block_size: int, what: str) -> None:
    """``bench.md`` and ``bench.csv`` into ``out_dir`` (a staged run directory)."""
    (out_dir / "bench.md").write_text(bench_markdown(result, block_size, what, peer_versions()))
    (out_dir / "bench.csv").write_text(rows_csv(result["rows"], result["group_of"]))


def reproduce_bench(cfg: Any, ctx: Any, model: Any = None) -> dict[str, Any] | None:
    """The ``bench`` section of ``reproduce`` (``bench=true``): N(0,1), the contaminated Gaussian and every Linear
    of the C6 model (``model``); writes bench.md / bench.csv; returns the summary for metrics.json."""
    from .model import find_targets
    from .synthetic import BENCH, contaminated_gaussian

    if not cfg.bench:
        return None
    missing, reasons, _ = peer_status()
    ctx.peers_missing(missing)
    for name, reason in reasons.items():
        if reason:  # installed, but it does not import or has no CPU backend
            ctx.log(f"bench: peer {name} unavailable: {reason}")
    gen = torch.Generator().manual_seed(cfg.seed + BENCH)
    n = int(cfg.bench_samples)
    limit = cfg.get("bench_max_layers")
    layers = [] if model is None else [(name, kind) for name, _, kind in find_targets(model, ())[0]]
    layers = layers if limit is None else layers[: int(limit)]

    def tensors():
        yield "N(0,1)", "gaussian", torch.randn(n, generator=gen)
        p, factor = float(cfg.opq.p_outlier), float(cfg.opq.factor)
        yield "contaminated", "contaminated", contaminated_gaussian(n, p, factor, gen)
        for name, kind in layers:
            w = model.get_submodule(name).weight.detach()
            yield "LM layers", name, (w.t() if kind == "conv1d" else w).float().cpu()

    result = run_bench(
        tensors(), block_size=64, progress=lambda it: ctx.progress(it, desc="bench", total=2 + len(layers))
    )
    for s in result["summary"]:
        if s["failed"]:
            ctx.log(
                f"bench: peer {s['method']} failed on {s['failed']} of {2 + len(layers)} tensors ({s['note']})"
            )
    what = (
        f"Tensors: N(0,1) and the contaminated Gaussian of C5 ({n:,} weights each), and the {len(layers)} Linear "
        "layers of the C6 model (`LM layers`)."
    )
    write_bench(ctx.run_dir, result, 64, what)
    return {"summary": result["summary"], "agreement": result["agreement"]}
