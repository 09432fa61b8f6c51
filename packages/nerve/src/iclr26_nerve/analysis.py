"""`analyze`: NerVE metrics of every FFN of a `transformers` model on some tokens.

One forward pass per batch under ``torch.no_grad()`` captures, for each selected layer, PreAct (output of
the registry's ``pre`` module, [B, S, D]) and PostAct (input of its ``post`` module, [B, S, D]). Token order
is discarded ([B, S, D] → [N, D]); positions with ``attention_mask == 0`` are dropped (the official
analyser keeps them); with ``sample_ratio < 1`` the *same* rows are kept for pre and post (and every layer).
The rows stream into one `StreamingCovariance` per (layer, pre|post), so memory is O(L·D²), never O(N²);
after the last batch the layers are turned into spectra one at a time.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import NerVEError
from .registry import ffn_modules
from .spectrum import LayerMetrics, StreamingCovariance, metrics_from_spectra, spectrum_of_covariance

_SPLIT = {"first_half": 0, "second_half": 1}


def _batches(inputs: Any, attention_mask: torch.Tensor | None) -> Iterable[dict[str, Any]]:
    if isinstance(inputs, torch.Tensor):
        if inputs.dim() != 2:
            raise NerVEError(f"inputs: expected token ids [B, S], got shape {list(inputs.shape)}")
        batch = {"input_ids": inputs}
        if attention_mask is not None:
            batch["attention_mask"] = attention_mask
        yield batch
    elif isinstance(inputs, Mapping):
        yield dict(inputs)
    elif isinstance(inputs, Iterable) and not isinstance(inputs, str | bytes):
        for item in inputs:
            yield from _batches(item, None)
    else:
        raise NerVEError(
            f"inputs: expected a [B, S] tensor, a dict or an iterable of batches, got {type(inputs).__name__}"
        )


def _d_model(model) -> int | None:
    cfg = getattr(model, "config", None)
    for key in ("hidden_size", "n_embd", "d_model"):
        v = getattr(cfg, key, None)
        if isinstance(v, int):
            return v
    return None


@dataclass
class NerVEReport:
    """Per-layer NerVE metrics of one model on one token set (layer order)."""

    layers: list[LayerMetrics]
    model_type: str = ""
    n_tokens: int = 0
    center: bool = True
    gated_pre: str = "gate"
    warnings: list[str] = field(default_factory=list)
    eigenvalues: dict[int, dict[str, list[float]]] = field(default_factory=dict)  # {layer: {pre, post}}

    def summary(self) -> dict[str, float]:
        """Layer means of every metric."""
        keys = (
            "se_pre",
            "se_post",
            "pr_pre",
            "pr_post",
            "eee_pre",
            "eee_post",
            "js",
            "pr_gain",
            "eee_diff",
            "se_diff",
        )
        return {k: sum(getattr(m, k) for m in self.layers) / len(self.layers) for k in keys}

    def to_dict(self, eigenvalues: bool = False) -> dict:
        out = {
            "model_type": self.model_type,
            "n_tokens": self.n_tokens,
            "center": self.center,
            "gated_pre": self.gated_pre,
            "warnings": self.warnings,
            "summary": self.summary(),
            "layers": [m.to_dict() for m in self.layers],
        }
        if eigenvalues:
            out["eigenvalues"] = {str(k): v for k, v in self.eigenvalues.items()}
        return out

    def to_json(self, path: str | Path, eigenvalues: bool = True) -> None:
        from iclr26_core.fs import write_json

        write_json(path, self.to_dict(eigenvalues))

    def to_csv(self, path: str | Path) -> None:
        from iclr26_core.fs import atomic_write_text

        rows = [m.to_dict() for m in self.layers]
        head = list(rows[0])
        lines = [",".join(head)] + [",".join(str(r[k]) for k in head) for r in rows]
        atomic_write_text(path, "\n".join(lines) + "\n")

    def plot(self, path: str | Path, title: str = "") -> str:
        from .plots import plot_spectra

        return plot_spectra(self, path, title=title)

    def __str__(self) -> str:
        lines = [
            f"NerVE {self.model_type}: N = {self.n_tokens} tokens, centred = {self.center}",
            "layer   SE pre→post      PR pre→post (d)      EEE pre→post     JS",
        ]
        for m in self.layers:
            lines.append(
                f"{m.layer:>5}  {m.se_pre:6.3f}→{m.se_post:6.3f}  {m.pr_pre:7.2f}→{m.pr_post:7.2f} "
                f"({m.d_model})  {m.eee_pre:.3f}→{m.eee_post:.3f}  {m.js:.4f}"
            )
        return "\n".join(lines + [f"warning: {w}" for w in self.warnings])


class _Capture:
    """Forward hooks that stash PreAct/PostAct of the selected layers for the current batch."""

    def __init__(self, modules: list, layers: list[int], split: str | None) -> None:
        self.pre: dict[int, torch.Tensor] = {}
        self.post: dict[int, torch.Tensor] = {}
        self.handles = []
        for i in layers:
            pre_mod, post_mod, _ = modules[i]
            self.handles.append(pre_mod.register_forward_hook(self._pre_hook(i, split)))
            self.handles.append(post_mod.register_forward_pre_hook(self._post_hook(i)))

    def _pre_hook(self, i: int, split: str | None):
        def hook(module, args, output):
            out = output[0] if isinstance(output, tuple) else output
            if split is not None:
                out = out.chunk(2, dim=-1)[_SPLIT[split]]
            self.pre[i] = out.detach()

        return hook

    def _post_hook(self, i: int):
        def hook(module, args):
            self.post[i] = args[0].detach()

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()


def analyze(
    model,
    inputs,
    *,
    attention_mask: torch.Tensor | None = None,
    layers: Iterable[int] | None = None,
    sample_ratio: float = 1.0,
    max_tokens: int | None = None,
    center: bool = True,
    gated_pre: str = "gate",
    dtype: torch.dtype = torch.float32,
    keep_eigenvalues: bool = True,
    seed: int = 0,
) -> NerVEReport:
    """NerVE metrics of each FFN of ``model`` on ``inputs`` → `NerVEReport`.

    inputs: token ids [B, S] (with ``attention_mask`` [B, S]), a dict of model inputs, or an iterable of
    either. ``layers``: layer indices (default all). ``sample_ratio`` ∈ (0, 1]: keep that fraction of the
    (unmasked) rows of each batch, the same rows for pre and post. ``max_tokens``: stop after that many rows.
    All hooks are removed on exit, also on error; the model's train/eval mode is restored.
    """
    spec, modules = ffn_modules(model, gated_pre)
    n_layers = len(modules)
    chosen = list(range(n_layers)) if layers is None else [int(i) for i in layers]
    bad = [i for i in chosen if not 0 <= i < n_layers]
    if bad:
        raise NerVEError(
            f"layer {bad[0]} is out of range: the model has {n_layers} FFN layers (0..{n_layers - 1})"
        )
    if not chosen:
        raise NerVEError("no layers selected")
    if not 0.0 < sample_ratio <= 1.0:
        raise NerVEError(f"sample_ratio must be in (0, 1], got {sample_ratio}")
    if max_tokens is not None and max_tokens < 2:
        raise NerVEError(f"max_tokens must be ≥ 2, got {max_tokens}")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    acc: dict[tuple[int, str], StreamingCovariance] = {}
    n_rows = 0
    was_training = model.training
    capture = _Capture(modules, chosen, spec.split)
    try:
        model.eval()
        with torch.no_grad():
            for batch in _batches(inputs, attention_mask):
                if max_tokens is not None and n_rows >= max_tokens:
                    break
                batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
                ids = batch.get("input_ids")
                if isinstance(ids, torch.Tensor) and ids.dim() != 2:
                    raise NerVEError(f"input_ids: expected [B, S], got shape {list(ids.shape)}")
                capture.pre.clear()
                capture.post.clear()
                model(**batch)
                mask = batch.get("attention_mask")
                rows = _row_index(capture.pre[chosen[0]], mask, sample_ratio, gen)
                if max_tokens is not None:
                    rows = rows[: max_tokens - n_rows]
                for i in chosen:
                    for kind, store in (("pre", capture.pre), ("post", capture.post)):
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
        model.train(was_training)
    if n_rows < 2:
        raise NerVEError(f"need at least 2 (unmasked) token rows, got N = {n_rows}")
    report = NerVEReport(
        [],
        model_type=str(getattr(model.config, "model_type", "")),
        n_tokens=n_rows,
        center=center,
        gated_pre=gated_pre,
    )
    d_model = _d_model(model)
    for i in chosen:  # one layer at a time: covariance → eigvalsh → metrics → free
        eig_pre = spectrum_of_covariance(acc.pop((i, "pre")).covariance()).cpu()
        eig_post = spectrum_of_covariance(acc.pop((i, "post")).covariance()).cpu()
        m = metrics_from_spectra(eig_pre, eig_post, layer=i, n_tokens=n_rows, d_model=d_model)
        report.layers.append(m)
        if keep_eigenvalues:
            report.eigenvalues[i] = {"pre": eig_pre.tolist(), "post": eig_post.tolist()}
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
    attention_mask: torch.Tensor | None = None,
    layers: Iterable[int] | None = None,
    gated_pre: str = "gate",
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """{layer: (PreAct [N, D], PostAct [N, D])} of one batch, masked rows dropped — the raw matrices that
    `analyze` streams into covariances (for inspection, cross-checks and peers; O(N·D) memory)."""
    spec, modules = ffn_modules(model, gated_pre)
    chosen = list(range(len(modules))) if layers is None else [int(i) for i in layers]
    bad = [i for i in chosen if not 0 <= i < len(modules)]
    if bad:
        raise NerVEError(f"layer {bad[0]} is out of range: the model has {len(modules)} FFN layers")
    batch = next(iter(_batches(inputs, attention_mask)))
    device = next(model.parameters()).device
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    capture = _Capture(modules, chosen, spec.split)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(**batch)
    finally:
        capture.remove()
        model.train(was_training)
    rows = _row_index(capture.pre[chosen[0]], batch.get("attention_mask"), 1.0, torch.Generator())
    return {
        i: tuple(t[i].reshape(-1, t[i].shape[-1])[rows.to(t[i].device)] for t in (capture.pre, capture.post))
        for i in chosen
    }


def _row_index(pre: torch.Tensor, mask: Any, ratio: float, gen: torch.Generator) -> torch.Tensor:
    n_all = pre.reshape(-1, pre.shape[-1]).shape[0]
    if isinstance(mask, torch.Tensor):
        if mask.numel() != n_all:
            raise NerVEError(f"attention_mask has {mask.numel()} entries but the batch has {n_all} positions")
        rows = torch.nonzero(mask.reshape(-1).cpu() > 0).flatten()
    else:
        rows = torch.arange(n_all)
    if ratio < 1.0 and rows.numel():
        k = max(1, math.ceil(ratio * rows.numel()))
        rows = rows[torch.randperm(rows.numel(), generator=gen)[:k]].sort().values
    return rows


def load_report(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
