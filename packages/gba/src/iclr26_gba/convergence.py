"""Has bias adaptation converged? Per-group firing frequency against the group's target (TAF).

For each group k with target p_k, over its neurons m:

    ratio_k = median_m(p_m) / p_k        (p_m: the neuron's firing frequency on some rows)

A group is *on target* when 1/tol ≤ ratio_k ≤ tol (default tol = 1.25, i.e. 0.8–1.25), *above* when
ratio_k > tol and *below* when ratio_k < 1/tol. The BA rule lowers a bias only while its neuron fires above
its target and raises it only when the neuron is dead, so every p_m in [ε, p_target] is a fixed point of the
rule: "above" means adaptation has not finished (the codes are denser than the TAFs ask), "below" is a state
the rule itself leaves alone (reported, not warned about). Two places use it:

* during training (`ConvergenceMonitor`), on each bias-update window's frequencies — the same statistics the
  BA rule acts on — to stop once no group has been above target for ``patience`` consecutive updates;
* after training (`group_firing`), on held-out rows, for ``metrics.json``, the report and the warning.

A group whose target times the number of rows is below ``MIN_EXPECTED`` firings cannot be judged on those
rows: it is reported with ``judged: false`` and never counted as off target.
"""

from __future__ import annotations

import torch

MIN_EXPECTED = 10.0  # expected firings per neuron below which a group's median is too noisy to judge


def group_ratios(freq: torch.Tensor, groups: torch.Tensor, taf: torch.Tensor) -> torch.Tensor:
    """[K] median firing frequency of each group's neurons divided by the group's target."""
    freq = torch.as_tensor(freq).double().cpu()
    groups = torch.as_tensor(groups).cpu()
    taf = torch.as_tensor(taf).double().cpu()
    out = torch.empty(len(taf), dtype=torch.float64)
    for k in range(len(taf)):
        members = freq[groups == k]
        out[k] = members.median() / taf[k] if len(members) else float("nan")
    return out


def status(ratio: float, tolerance: float) -> str:
    """ "above", "on" or "below" target for a group's median firing ÷ TAF."""
    if ratio > tolerance:
        return "above"
    return "on" if ratio >= 1.0 / tolerance else "below"


def group_firing(
    freq: torch.Tensor, groups: torch.Tensor, taf: torch.Tensor, rows: int, tolerance: float = 1.25
) -> list[dict]:
    """Per group: target, median and mean firing, ratio (median ÷ target), dead fraction, status ("above",
    "on", "below"; None when not judged) and judged (enough rows: target·rows ≥ MIN_EXPECTED)."""
    freq = torch.as_tensor(freq).double().cpu()
    groups = torch.as_tensor(groups).cpu()
    ratios = group_ratios(freq, groups, taf)
    out = []
    for k, target in enumerate(torch.as_tensor(taf).double().tolist()):
        members = freq[groups == k]
        ratio = float(ratios[k])
        judged = target * rows >= MIN_EXPECTED
        out.append(
            {
                "group": k,
                "target": target,
                "neurons": len(members),
                "median_firing": float(members.median()),
                "mean_firing": float(members.mean()),
                "ratio": ratio,
                "dead_fraction": float((members == 0).double().mean()),
                "judged": judged,
                "status": status(ratio, tolerance) if judged else None,
            }
        )
    return out


def off_target_warning(groups: list[dict], tolerance: float, where: str = "held-out rows") -> str | None:
    """One warning line naming the judged groups above tol × their target, or None."""
    bad = [g for g in groups if g["status"] == "above"]
    if not bad:
        return None
    parts = ", ".join(f"group {g['group']} (TAF {g['target']:.2g}) at {g['ratio']:.2f}x" for g in bad)
    return (
        f"warning: {len(bad)} of {len(groups)} groups fire above their target on {where} "
        f"(median firing / TAF > {tolerance:.2f}): {parts}; "
        "bias adaptation has not converged: train longer (--steps, or --resume DIR)"
    )


class ConvergenceMonitor:
    """Watches the bias-update windows of a `GroupBiasAdaptation`; ``converged`` once no group's window ratio
    has been above ``tolerance`` for ``patience`` consecutive updates (the BA rule has nothing left to lower).
    ``history`` keeps, per update, the step and the K ratios (rounded)."""

    def __init__(self, tolerance: float = 1.25, patience: int = 5) -> None:
        if not tolerance > 1.0:
            raise ValueError(f"tolerance must be > 1, got {tolerance}")
        self.tolerance, self.patience = float(tolerance), max(1, int(patience))
        self.streak = 0
        self.converged_at: int | None = None
        self.history: list[dict] = []

    @property
    def converged(self) -> bool:
        return self.converged_at is not None

    def observe(self, step: int, freq: torch.Tensor, groups: torch.Tensor, taf: torch.Tensor) -> bool:
        """Record one window's frequencies [M]; True once converged (and from then on)."""
        ratios = group_ratios(freq, groups, taf)
        ok = bool(all(float(r) <= self.tolerance for r in ratios))
        self.streak = self.streak + 1 if ok else 0
        self.history.append({"step": int(step), "ratios": [round(float(r), 3) for r in ratios]})
        if self.streak >= self.patience and self.converged_at is None:
            self.converged_at = int(step)
        return self.converged


def group_table(groups: list[dict]) -> str:
    """The per-group firing against target as a markdown table."""
    lines = [
        "| group | TAF | neurons | median firing | ratio | mean firing | dead | status |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for g in groups:
        verdict = {"on": "on target", "above": "**above**", "below": "below"}.get(g["status"], "too few rows")
        lines.append(
            f"| {g['group']} | {g['target']:.3g} | {g['neurons']} | {g['median_firing']:.3g} | "
            f"{g['ratio']:.2f} | {g['mean_firing']:.3g} | {g['dead_fraction']:.3f} | {verdict} |"
        )
    return "\n".join(lines)
