"""`analyze`: NerVE metrics of every FFN of a model on some tokens.

Forward passes under ``torch.no_grad()`` capture, for each selected layer, PreAct (output of the registry's
``pre`` module, [B, S, D]) and PostAct (input of its ``post`` module, [B, S, D]), and with ``residual=True``
the residual stream after the block (the block's output x + FFN(x), [B, S, d]). Token order is discarded
([B, S, D] → [N, D]); positions with ``attention_mask == 0`` are dropped (the official analyser keeps them);
with ``sample_ratio < 1`` the *same* rows are kept for every capture point and every layer. The rows stream
into one `StreamingCovariance` per (layer, capture point), so memory never grows with N.

Memory. An accumulator holds (D² + D) floats (float32: 4 bytes each; float64: 8). ``layers_per_pass=k``
holds the accumulators of k layers at once, 2·k·(D² + D) floats (plus k·(d² + d) with ``residual``), and
makes one pass over the inputs per group of k layers (a pass stops its forward after the group's last
layer); ``None`` (the default) holds all L layers' in one pass, 2·L·(D² + D) floats: 3.2 GB for L = 24,
D = 4096 in float32, against 134 MB with ``layers_per_pass=1``. On top of that: one batch's activations of
the group's layers while it streams in, and per layer, one at a time, the [D, D] covariance and
``eigvalsh``'s workspace. ``NerVEReport.accumulator_bytes`` records the peak the accumulators reached.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from .capture import Capture, StopForward, batches, has_offload_hooks, reiterable, row_index
from .errors import NerVEError
from .nerve_report import NerVEReport
from .registry import ffn_modules, model_type_of
from .spectrum import StreamingCovariance, metrics_from_spectra, spectrum_of_covariance

__all__ = ["NerVEReport", "analyze", "capture_activations", "load_report"]


def _d_model(model, modules: list | None = None) -> int | None:
    """The residual width d (the rank bound of PreAct): from ``model.config`` or a ``model.cfg``, else the
    input width of the first layer's FFN projections (a Linear or Conv1D; models without a config)."""
    from .detect import _widths

    for holder in (getattr(model, "config", None), getattr(model, "cfg", None)):
        for key in ("hidden_size", "n_embd", "d_model"):
            v = getattr(holder, key, None)
            if isinstance(v, int):
                return v
    for mod in (modules or [])[:1]:
        for part in mod[:2]:  # the pre projection maps d → D; the post projection D → d
            w = _widths(part)
            if w is not None:
                return w[0] if part is mod[0] else w[1]
    return None


def select_layers(layers: Iterable[int] | None, n_layers: int) -> list[int]:
    """Sorted, de-duplicated layer indices (all by default); `NerVEError` when one is out of range."""
    chosen = list(range(n_layers)) if layers is None else sorted({int(i) for i in layers})
    bad = [i for i in chosen if not 0 <= i < n_layers]
    if bad:
        raise NerVEError(
            f"layer {bad[0]} is out of range: the model has {n_layers} FFN layers (0..{n_layers - 1})"
        )
    if not chosen:
        raise NerVEError("no layers selected")
    return chosen


def _accumulate(
    model,
    inputs: Any,
    attention_mask: Any,
    modules: list,
    group: list[int],
    *,
    split: str | None,
    residual: bool,
    stop_early: bool,
    sample_ratio: float,
    max_tokens: int | None,
    center: bool,
    dtype: torch.dtype,
    seed: int,
) -> tuple[dict[tuple[int, str], StreamingCovariance], int]:
    """One pass over the inputs: the accumulators of ``group``'s layers and the number of rows."""
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)  # the same rows in every pass
    acc: dict[tuple[int, str], StreamingCovariance] = {}
    n_rows = 0
    capture = Capture(modules, group, split, residual, stop_after=group[-1] if stop_early else None)
    try:
        with torch.no_grad():
            for batch in batches(inputs, attention_mask):
                if max_tokens is not None and n_rows >= max_tokens:
                    break
                batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
                ids = batch.get("input_ids")
                if isinstance(ids, torch.Tensor) and ids.dim() != 2:
                    raise NerVEError(f"input_ids: expected [B, S], got shape {list(ids.shape)}")
                capture.clear()
                with contextlib.suppress(StopForward):  # the pass needs no more of the forward
                    model(**batch)
                rows = row_index(capture.pre[group[0]], batch.get("attention_mask"), sample_ratio, gen)
                if max_tokens is not None:
                    rows = rows[: max_tokens - n_rows]
                points = (("pre", capture.pre), ("post", capture.post))
                if residual:
                    points += (("res", capture.res),)
                for i in group:
                    for kind, store in points:
                        x = store[i].reshape(-1, store[i].shape[-1])[rows.to(store[i].device)]
                        if not torch.isfinite(x).all():
                            raise NerVEError(f"layer {i} {kind}-activations contain NaN or Inf")
                        key = (i, kind)
                        if key not in acc:
                            acc[key] = StreamingCovariance(
                                x.shape[1], center=center, dtype=dtype, device=x.device
                            )
                        acc[key].update(x)
                n_rows += int(rows.numel())
    finally:
        capture.remove()
    return acc, n_rows


def analyze(
    model,
    inputs,
    *,
    attention_mask: Any = None,
    layers: Iterable[int] | None = None,
    sample_ratio: float = 1.0,
    max_tokens: int | None = None,
    center: bool = True,
    gated_pre: str = "gate",
    dtype: torch.dtype = torch.float32,
    keep_eigenvalues: bool = True,
    seed: int = 0,
    residual: bool = False,
    layers_per_pass: int | None = None,
) -> NerVEReport:
    """NerVE metrics of each FFN of ``model`` on ``inputs`` → `NerVEReport`.

    inputs: token ids [B, S] (with ``attention_mask`` [B, S]), a dict of model inputs (with or without
    its own ``attention_mask``), or an iterable of either (``attention_mask``: one mask per batch). A
    one-shot iterator is kept as a list when more than one pass is made. ``layers``: layer indices
    (default all; sorted and de-duplicated). ``sample_ratio`` ∈ (0, 1]: keep that fraction of the
    (unmasked) rows of each batch, the same rows for every capture point and layer. ``max_tokens``: stop
    after that many rows. ``residual``: also the residual stream after each block (``se_res``, ``pr_res``,
    ``eee_res``, ``rankme_res``). ``layers_per_pass``: hold that many layers' accumulators at once (see
    the module docstring for the memory; None = all layers in one pass).
    The model needs no ``config`` (``register_architecture`` keys on its class name then). All hooks are
    removed on exit, also on error; the model's train/eval mode is restored.
    """
    spec, modules = ffn_modules(model, gated_pre)
    chosen = select_layers(layers, len(modules))
    if not 0.0 < sample_ratio <= 1.0:
        raise NerVEError(f"sample_ratio must be in (0, 1], got {sample_ratio}")
    if max_tokens is not None and max_tokens < 2:
        raise NerVEError(f"max_tokens must be ≥ 2, got {max_tokens}")
    if layers_per_pass is not None and layers_per_pass < 1:
        raise NerVEError(f"layers_per_pass must be ≥ 1, got {layers_per_pass}")
    k = len(chosen) if layers_per_pass is None else layers_per_pass
    groups = [chosen[j : j + k] for j in range(0, len(chosen), k)]
    if len(groups) > 1:
        inputs, attention_mask = reiterable(inputs, attention_mask)
    stop_early = not has_offload_hooks(model)
    d_model = _d_model(model, modules)
    report = NerVEReport(
        [],
        model_type=model_type_of(model),
        center=center,
        gated_pre=gated_pre,
        residual=residual,
        layers_per_pass=layers_per_pass,
        passes=len(groups),
    )
    was_training = model.training
    model.eval()
    try:
        for group in groups:
            acc, n_rows = _accumulate(
                model,
                inputs,
                attention_mask,
                modules,
                group,
                split=spec.split,
                residual=residual,
                stop_early=stop_early,
                sample_ratio=sample_ratio,
                max_tokens=max_tokens,
                center=center,
                dtype=dtype,
                seed=seed,
            )
            if n_rows < 2:
                raise NerVEError(f"need at least 2 (unmasked) token rows, got N = {n_rows}")
            if report.n_tokens and n_rows != report.n_tokens:
                raise NerVEError(
                    f"the inputs gave {n_rows} rows in one pass and {report.n_tokens} in another; with "
                    "layers_per_pass they must be the same on every pass (a re-iterable input)"
                )
            report.n_tokens = n_rows
            report.accumulator_bytes = max(report.accumulator_bytes, sum(a.nbytes for a in acc.values()))
            for i in group:  # one layer at a time: covariance → eigvalsh → metrics → free
                eigs = {
                    kind: spectrum_of_covariance(acc.pop((i, kind)).covariance()).cpu()
                    for kind in (("pre", "post", "res") if residual else ("pre", "post"))
                }
                report.layers.append(
                    metrics_from_spectra(
                        eigs["pre"],
                        eigs["post"],
                        layer=i,
                        n_tokens=n_rows,
                        d_model=d_model,
                        eig_res=eigs.get("res"),
                    )
                )
                if keep_eigenvalues:
                    report.eigenvalues[i] = {kind: v.tolist() for kind, v in eigs.items()}
            del acc
    finally:
        model.train(was_training)
    n_rows = report.n_tokens
    d_ffn = max(m.d_ffn for m in report.layers)
    if n_rows < 4 * d_ffn:
        msg = f"N = {n_rows} tokens < 4·D = {4 * d_ffn}: PR and SE are capped by N; use more tokens"
        report.warnings.append(msg)
        warnings.warn(msg, stacklevel=2)
    if d_model is not None:
        report.warnings.append(
            f"rank bound: PR_pre ≤ d_model = {d_model} (W_up maps R^{d_model} → R^{d_ffn}), "
            "so part of any PR gain is guaranteed by rank alone"
        )
    return report


def capture_activations(
    model,
    inputs,
    *,
    attention_mask: Any = None,
    layers: Iterable[int] | None = None,
    gated_pre: str = "gate",
    residual: bool = False,
) -> dict[int, tuple[torch.Tensor, ...]]:
    """{layer: (PreAct [N, D], PostAct [N, D][, residual [N, d]])} of the first batch, masked rows dropped:
    the raw matrices that `analyze` streams into covariances (for inspection, cross-checks and peers;
    O(N·D) memory)."""
    spec, modules = ffn_modules(model, gated_pre)
    chosen = select_layers(layers, len(modules))
    batch = next(iter(batches(inputs, attention_mask)))
    device = next(model.parameters()).device
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    capture = Capture(modules, chosen, spec.split, residual)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(**batch)
    finally:
        capture.remove()
        model.train(was_training)
    rows = row_index(capture.pre[chosen[0]], batch.get("attention_mask"), 1.0, torch.Generator())
    stores = (capture.pre, capture.post, capture.res) if residual else (capture.pre, capture.post)
    return {i: tuple(t[i].reshape(-1, t[i].shape[-1])[rows.to(t[i].device)] for t in stores) for i in chosen}


def load_report(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
