"""The λ sweep: every arm paired with its seed's plain arm (Δ recomputed here), the summary's verdict from the
rows, bad arguments as one line."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26_core.configs import compose
from iclr26_core.testing import assert_one_line_error, run_cli
from iclr26_qprompt.cli import main
from iclr26_qprompt.sweep import render, summary, sweep


def test_sweep_rows_are_paired_with_the_plain_arm():
    cfg = compose(
        "iclr26_qprompt.conf", "reproduce", ["scale=smoke", "train.steps=2", "model.num_queries=10"]
    )
    rows = sweep(cfg, ["mean", "expected"], [0.5], [0], log=lambda _s: None)
    assert [(r["objective"], r["weight"]) for r in rows] == [
        ("plain", None),
        ("mean", 0.5),
        ("expected", 0.5),
    ]
    plain = rows[0]
    for r in rows:
        assert r["target"] == pytest.approx(np.mean([r[d] for d in ("style", "adverse", "fog")]))
        assert r["delta"] == pytest.approx(r["target"] - plain["target"])
    # the GRQA arms add a loss term: their training loss differs from the plain arm's
    assert all(r["final_loss"] != plain["final_loss"] for r in rows[1:])
    text = summary(rows)
    assert "| mean | 0.5 | 1 |" in text and "| expected | 0.5 | 1 |" in text
    assert render(rows).count("\n") == len(rows) + 1


def test_summary_verdict_needs_every_seed():
    base = {"objective": "mean", "weight": 1.0}
    rows = [{**base, "seed": 0, "delta": 0.02}, {**base, "seed": 1, "delta": -0.01}]
    assert "| mean | 1 | 2 | +0.0050 | no |" in summary(rows)
    rows[1]["delta"] = 0.01
    assert "| mean | 1 | 2 | +0.0150 | yes |" in summary(rows)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--objectives", "median"], "--objectives must be among"),
        (["--weights", "0,1"], "--weights must be positive"),
        (["--weights", "a"], "--weights must be comma-separated"),
    ],
)
def test_bad_sweep_arguments_are_one_line(args, pattern):
    assert_one_line_error(run_cli(main, ["sweep", *args, "scale=smoke"]), pattern)
