"""Claims, the reproduction report and its files.

A paper's ``reproduce`` returns ``Results(claims=[Claim(...)], metrics={...})``. Every ``Claim.holds`` is
computed by the caller from a measurement (``holds=measured <= bound``), and ``rule`` says in words
which comparison decided it. `write_report` turns them into ``metrics.json`` and ``report.md``;
`claims_table` renders the markdown table the CLI prints and the package README shows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .fs import atomic_write_text, write_json


@dataclass
class Claim:
    """One reproduced claim: ``holds`` must be a computed boolean, ``rule`` the comparison that gave it.

    ``decided=False`` marks a claim the run cannot decide: a headroom gate fixed before the run (the model or
    the strongest baseline is at chance, the interval straddles the minimal effect) says the measurement says
    nothing either way. Such a claim does not hold (``holds`` must be False), and the table prints "undecided".
    """

    id: str
    claim: str
    paper: Any
    measured: Any
    holds: bool
    rule: str
    note: str = ""
    decided: bool = True

    def __post_init__(self) -> None:
        # numpy/torch booleans are fine; anything else (a string "yes", None) is a bug in the caller
        holds = self.holds.item() if hasattr(self.holds, "item") else self.holds
        if not isinstance(holds, bool):
            raise TypeError(f"Claim {self.id}: holds must be a computed bool, got {self.holds!r}")
        self.holds = holds
        decided = self.decided.item() if hasattr(self.decided, "item") else self.decided
        if not isinstance(decided, bool):
            raise TypeError(f"Claim {self.id}: decided must be a computed bool, got {self.decided!r}")
        if not decided and holds:
            raise ValueError(f"Claim {self.id}: an undecided claim cannot hold")
        self.decided = decided


@dataclass
class Results:
    """What a paper's ``reproduce`` returns: the claims and the raw numbers behind them and the figures."""

    claims: list[Claim]
    metrics: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)


def fmt(x: Any, digits: int = 4) -> str:
    """A compact human rendering of a number, list or dict for tables."""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        if x != 0 and (abs(x) < 10 ** -(digits - 1) or abs(x) >= 10**6):
            return f"{x:.{digits - 1}e}"
        return f"{x:.{digits}g}"
    if isinstance(x, list | tuple):
        return "[" + ", ".join(fmt(v, digits) for v in x) + "]"
    if isinstance(x, dict):
        return ", ".join(f"{k}={fmt(v, digits)}" for k, v in x.items())
    return str(x)


def _cell(x: Any) -> str:
    return fmt(x).replace("|", "\\|").replace("\n", " ")


def claims_table(claims: list[Claim]) -> str:
    """The markdown claims table: claim · paper · ours · holds? · rule/note."""
    lines = [
        "| id | claim | paper | ours | holds | rule | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in claims:
        verdict = "yes" if c.holds else "**no**" if c.decided else "undecided"
        cells = [c.id, c.claim, c.paper, c.measured, verdict, c.rule, c.note]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    return "\n".join(lines)


SMOKE_NOTE = (
    "scale=smoke is a plumbing check (tiny sizes, a few steps): the code ran end to end; the verdicts below "
    "mean nothing about the paper (run scale=cpu, the default, for results)"
)


def is_claim(claim_id: str) -> bool:
    """Rows whose id starts with "C" are the paper's claims; others (V1: a peer agrees, P1: a planted check ...)
    are checks, counted apart."""
    return str(claim_id).startswith("C")


def _row(c: Any) -> tuple[str, bool, bool]:
    if isinstance(c, dict):
        return str(c["id"]), bool(c["holds"]), bool(c.get("decided", True))
    return str(c.id), bool(c.holds), bool(getattr(c, "decided", True))


def verdict_summary(claims: Iterable[Any], scale: str = "") -> str:
    """ "2/6 claims hold, 4/4 checks pass" (Claim objects or metrics.json dicts), then ", 1 undecided" when some
    rows could not be decided; a table of checks only (ids not starting with "C") reads "3/4 checks pass". At
    scale=smoke marked as a plumbing check."""
    rows = [_row(c) for c in claims]
    main = [h for i, h, _ in rows if is_claim(i)]
    checks = [h for i, h, _ in rows if not is_claim(i)]
    undecided = sum(not d for _, _, d in rows)
    parts = [f"{sum(main)}/{len(main)} claims hold"] if main or not checks else []
    if checks:
        parts.append(f"{sum(checks)}/{len(checks)} checks pass")
    if undecided:
        parts.append(f"{undecided} undecided")
    text = ", ".join(parts)
    if scale == "smoke":
        text += " (scale=smoke: a plumbing check, not a result)"
    return text


def peers_line(slug: str, missing: Iterable[str]) -> str:
    """The one line for peer libraries that are not installed, or ``""`` when none is missing::

    peers not installed: torchao, hqq (pip install iclr26-bof4[peers])
    """
    missing = list(dict.fromkeys(missing))
    if not missing:
        return ""
    dist = f"iclr26-{slug.replace('_', '-')}" if slug else "iclr26-<slug>"
    return f"peers not installed: {', '.join(missing)} (pip install {dist}[peers])"


def write_report(
    run_dir: str | Path,
    *,
    paper: str,
    title: str,
    version: str,
    scale: str,
    seconds: float,
    results: Results,
    config_yaml: str = "",
    command: str = "",
    peers_missing: Iterable[str] = (),
) -> dict[str, Any]:
    """Write ``metrics.json`` and ``report.md`` into ``run_dir``; returns the metrics dict.

    ``peers_missing``: peer libraries that were not installed (one line in the report, a list in the metrics).
    """
    run_dir = Path(run_dir)
    peers_missing = list(dict.fromkeys(peers_missing))
    metrics = {
        "paper": paper,
        "version": version,
        "scale": scale,
        "seconds": round(seconds, 2),
        **({"plumbing_check": True} if scale == "smoke" else {}),
        "claims": [asdict(c) for c in results.claims],
        **({"peers_not_installed": peers_missing} if peers_missing else {}),
        **results.metrics,
    }
    write_json(run_dir / "metrics.json", metrics)
    lines = [
        f"# {title}",
        "",
        f"`iclr26-{paper.replace('_', '-')}` {version} · scale `{scale}` · {seconds:.1f} s · "
        f"{verdict_summary(results.claims, scale)}",
        "",
    ]
    if scale == "smoke":
        lines += [f"> {SMOKE_NOTE}.", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += [claims_table(results.claims), ""]
    if peers_missing:
        lines += [peers_line(paper, peers_missing), ""]
    for fig in results.figures:
        lines += [f"![{Path(fig).stem}]({Path(fig).name})", ""]
    if config_yaml:
        lines += [
            "<details><summary>resolved config</summary>",
            "",
            "```yaml",
            config_yaml.rstrip(),
            "```",
            "",
            "</details>",
            "",
        ]
    atomic_write_text(run_dir / "report.md", "\n".join(lines))
    return metrics


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "metrics.json").read_text())


def pyplot():
    """``matplotlib.pyplot`` with the non-interactive Agg backend (works headless, in CI and over ssh)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> str:
    """Save a matplotlib figure as PNG atomically, close it, return the file name."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
        pyplot().close(fig)
    return path.name
