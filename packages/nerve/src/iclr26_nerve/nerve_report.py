"""`NerVEReport`: per-layer NerVE metrics of one model on one token set, with JSON/CSV/figure writers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .spectrum import LayerMetrics


@dataclass
class NerVEReport:
    """Per-layer NerVE metrics of one model on one token set (layer order)."""

    layers: list[LayerMetrics]
    model_type: str = ""
    n_tokens: int = 0
    center: bool = True
    gated_pre: str = "gate"
    warnings: list[str] = field(default_factory=list)
    eigenvalues: dict[int, dict[str, list[float]]] = field(
        default_factory=dict
    )  # {layer: {pre, post[, res]}}
    residual: bool = False  # the residual stream x + FFN(x) was captured too (se_res, pr_res, ...)
    layers_per_pass: int | None = None  # layers whose accumulators were held at once (None: all)
    passes: int = 1  # passes over the inputs (one per group of layers_per_pass layers)
    accumulator_bytes: int = 0  # peak bytes held by the covariance accumulators at once

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
            "rankme_pre",
            "rankme_post",
            "pr_pre_per_d",
            "pr_post_per_d",
        )
        if self.residual:
            keys += ("se_res", "pr_res", "eee_res", "rankme_res")
        return {k: sum(getattr(m, k) for m in self.layers) / len(self.layers) for k in keys}

    def to_dict(self, eigenvalues: bool = False) -> dict:
        out = {
            "model_type": self.model_type,
            "n_tokens": self.n_tokens,
            "center": self.center,
            "gated_pre": self.gated_pre,
            "residual": self.residual,
            "layers_per_pass": self.layers_per_pass,
            "passes": self.passes,
            "accumulator_bytes": self.accumulator_bytes,
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
        head = [k for k in rows[0] if self.residual or not k.endswith("_res")]
        lines = [",".join(head)] + [",".join("" if r[k] is None else str(r[k]) for k in head) for r in rows]
        atomic_write_text(path, "\n".join(lines) + "\n")

    def plot(self, path: str | Path, title: str = "") -> str:
        from .plots import plot_spectra

        return plot_spectra(self, path, title=title)

    def __str__(self) -> str:
        lines = [
            f"NerVE {self.model_type}: N = {self.n_tokens} tokens, centred = {self.center}",
            "layer   SE pre→post      PR pre→post (d)      EEE pre→post     JS"
            + ("       SE/PR/EEE residual" if self.residual else ""),
        ]
        for m in self.layers:
            res = f"  {m.se_res:6.3f} {m.pr_res:7.2f} {m.eee_res:.3f}" if self.residual else ""
            lines.append(
                f"{m.layer:>5}  {m.se_pre:6.3f}→{m.se_post:6.3f}  {m.pr_pre:7.2f}→{m.pr_post:7.2f} "
                f"({m.d_model})  {m.eee_pre:.3f}→{m.eee_post:.3f}  {m.js:.4f}{res}"
            )
        return "\n".join(lines + [f"warning: {w}" for w in self.warnings])
