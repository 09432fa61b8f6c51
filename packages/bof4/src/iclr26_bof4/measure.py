"""The measurements behind C3-C5: quantisation error per codebook and block size, and OPQ's gain.

Two weight sources (``weights.source``):

* ``gaussian`` (the cpu default, the spec's miniature): held-out N(0,1) weights for C3/C4 and the contaminated
  Gaussian (a fraction ``opq.p_outlier`` of the weights × ``opq.factor``) for C5;
* ``model``: the ``nn.Linear`` layers of a language model (the C6 model(s): ``lm.model``, e.g. the paper's
  Llama-3.1-8B / Qwen2.5-7B / Mistral-7B at ``scale=paper``), every layer quantised as ``apply_to_model`` does
  ([out, in], blocks along the input dimension), errors pooled over all its weights.

Both return ``{"mse": {codebook: {I: MSE}}, "mae": {...}}`` and ``{"ratio": {I: MSE(BOF4-S+OPQ)/MSE(BOF4-S)},
"outlier_fraction": {I: ...}}``.
"""

from __future__ import annotations

from typing import Any

import torch

from .config import CODEBOOK_NAMES, codebook_available
from .quantizer import quantization_error, quantize
from .synthetic import CONTAMINATED, HELDOUT, contaminated_gaussian


def _sizes(cfg_part: Any) -> list[int]:
    return [int(i) for i in cfg_part.block_sizes]


def gaussian_errors(cfg: Any, ctx: Any) -> dict[str, Any]:
    """C3/C4 on held-out N(0,1) weights: mean over ``errors.seeds`` draws of ``errors.n_samples`` weights."""
    sizes = _sizes(cfg.errors)
    seeds = int(cfg.errors.seeds)
    jobs = [
        (s, i, c) for s in range(seeds) for i in sizes for c in CODEBOOK_NAMES if codebook_available(c, i)
    ]
    out: dict[str, dict[str, dict[int, float]]] = {"mse": {}, "mae": {}}
    weights: dict[int, torch.Tensor] = {}
    for seed, block, name in ctx.progress(jobs, desc="C3/C4 held-out errors"):
        if seed not in weights:
            gen = torch.Generator().manual_seed(cfg.seed + HELDOUT + seed)
            weights = {seed: torch.randn(int(cfg.errors.n_samples), generator=gen)}
        err = quantization_error(weights[seed], name, block)
        for metric in ("mse", "mae"):
            cell = out[metric].setdefault(name, {})
            cell[block] = cell.get(block, 0.0) + err[metric] / seeds
    return out


def contaminated_opq(cfg: Any, ctx: Any) -> dict[str, Any]:
    """C5 on the contaminated Gaussian: MSE(BOF4-S+OPQ)/MSE(BOF4-S) and the outlier fraction, mean over seeds."""
    sizes = _sizes(cfg.opq)
    seeds = int(cfg.opq.seeds)
    ratio = {i: 0.0 for i in sizes}
    frac = {i: 0.0 for i in sizes}
    for s in ctx.progress(range(seeds), desc="C5 OPQ"):
        gen = torch.Generator().manual_seed(cfg.seed + CONTAMINATED + s)
        w = contaminated_gaussian(
            int(cfg.opq.n_samples), float(cfg.opq.p_outlier), float(cfg.opq.factor), gen
        )
        for i in sizes:
            plain = quantization_error(w, "bof4s-mse", i)
            opq = quantization_error(w, "bof4s-mse", i, opq_q=float(cfg.opq.q))
            ratio[i] += opq["mse"] / plain["mse"] / seeds
            frac[i] += opq["outlier_fraction"] / seeds
    return {"ratio": ratio, "outlier_fraction": frac}


def _layer_weights(model: Any, skip: tuple[str, ...]):
    from .model import find_targets

    targets, _ = find_targets(model, skip)
    plan = [(name, kind) for name, _, kind in targets]
    del targets
    for name, kind in plan:
        w = model.get_submodule(name).weight.detach()
        yield name, (w.t() if kind == "conv1d" else w)


def model_errors(
    model: Any,
    cfg: Any,
    ctx: Any,
    label: str = "",
    skip: tuple[str, ...] | None = None,
    sweep_books: tuple[str, ...] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """C3/C4 and C5 on the Linear layers of ``model`` (``skip``, default ``lm.skip``): errors pooled over every
    weight.

    Block sizes: ``errors.block_sizes`` for C3/C4 — every codebook at I = 64, ``sweep_books`` (default every
    codebook) at the other sizes — and ``opq.block_sizes`` with ``opq.q`` for C5.
    """
    sizes, opq_sizes = _sizes(cfg.errors), _sizes(cfg.opq)
    skip = tuple(cfg.lm.get("skip", ()) or ()) if skip is None else skip
    books = {i: [c for c in CODEBOOK_NAMES if codebook_available(c, i)] for i in sizes}
    if sweep_books is not None:
        books = {i: b if i == 64 else [c for c in b if c in sweep_books] for i, b in books.items()}
    jobs = [(i, c, None) for i in sizes for c in books[i]]
    jobs += [(i, "bof4s-mse", None) for i in opq_sizes if i not in sizes]
    jobs += [(i, "bof4s-mse", float(cfg.opq.q)) for i in opq_sizes]
    sums: dict[tuple[int, str, float | None], list[float]] = {job: [0.0, 0.0, 0.0] for job in jobs}
    numel = 0
    layers = list(_layer_weights(model, skip))
    for _, w in ctx.progress(layers, desc=f"C3-C5 layers {label}".rstrip()):
        numel += w.numel()
        ref = w.double()
        for job in jobs:
            block, book, q = job
            qt = quantize(w, book, block, opq_q=q)
            diff = qt.dequantize().double() - ref
            acc = sums[job]
            acc[0] += float(diff.square().sum())
            acc[1] += float(diff.abs().sum())
            acc[2] += qt.outlier_idx.numel()
            del qt, diff
    errs: dict[str, dict[str, dict[int, float]]] = {"mse": {}, "mae": {}}
    for (block, book, q), (se, ae, _) in sums.items():
        if q is None and block in sizes:
            errs["mse"].setdefault(book, {})[block] = se / numel
            errs["mae"].setdefault(book, {})[block] = ae / numel
    ratio = {
        i: sums[(i, "bof4s-mse", float(cfg.opq.q))][0] / sums[(i, "bof4s-mse", None)][0] for i in opq_sizes
    }
    frac = {i: sums[(i, "bof4s-mse", float(cfg.opq.q))][2] / numel for i in opq_sizes}
    return errs, {"ratio": ratio, "outlier_fraction": frac, "numel": numel, "layers": len(layers)}
