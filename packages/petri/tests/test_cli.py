"""The CLI: fast --help, reproduce scale=smoke with computed verdicts, user verbs on saved data, bad input."""

from __future__ import annotations

import numpy as np

from iclr26_core.testing import check_smoke_report, cli_contract
from iclr26_petri.cli import main

test_help_does_not_import_torch, smoke_run, test_refuses_nonempty_out = cli_contract(
    main,
    "iclr26_petri",
    ["train", "--help"],
    ["profile", "--help"],
    mentions=["train", "embed", "profile"],
    smoke=["steps=4", "sweep.S=[2,4]", "sweep.mask=[0.5]"],
)


def test_reproduce_smoke_writes_computed_report(smoke_run):
    m, c = check_smoke_report(smoke_run, "petri", "C1 C2 C3 C4 C5 H1 P1", files=["bodipy.png", "roc.png"])
    gp = np.mean([r["gap"] for r in m["c1"]["petri"]])
    gq = np.mean([r["gap"] for r in m["c1"]["permuted"]])
    assert c["C1"]["holds"] == bool(gp >= m["c1"]["min_gap"] and gp > gq)
    assert c["C2"]["holds"] == bool(
        np.mean(m["c2"]["petri"]) >= np.mean(m["c2"]["permuted"]) + m["c2"]["margin"]
    )
    prof = [r["profiles"] for r in m["profiles"]["petri"]]
    tpr = {k: np.mean([p[k]["tpr"] for p in prof]) for k in ("image", "expression", "multimodal")}
    assert c["C3"]["holds"] == bool(
        tpr["multimodal"] >= max(tpr["image"], tpr["expression"]) + 0.02
        and tpr["multimodal"] >= m["late_fusion"]["tpr"] - 0.02
    )
    gc = {k: np.mean([p[k]["gc"] for p in prof]) for k in ("image", "expression", "multimodal")}
    assert c["C4"]["holds"] == bool(gc["multimodal"] >= max(gc["image"], gc["expression"]))
    post = np.mean([r["post"]["multimodal"]["tpr"] for r in m["profiles"]["petri"]])
    assert c["C5"]["holds"] == bool(tpr["multimodal"] >= post)
    assert m["train_log"]["petri"][0][-1]["step"] == 4  # steps=4 overrides train.steps
    h = m["probe"]["headroom"]["masked"]
    assert c["H1"]["holds"] == bool(h["gap"] >= m["c1"]["min_gap"])
    fp = np.mean([r["full"]["gap"] for r in m["probe"]["petri"]])
    fq = np.mean([r["full"]["gap"] for r in m["probe"]["permuted"]])
    assert c["P1"]["holds"] == bool(fp >= m["c1"]["min_gap"] and fp > fq)


def test_smoke_sweep_rows(smoke_run):
    """sweep.S / sweep.mask: one PETRI and one permuted training per value; S = 4 is the smoke scale's own
    setting, so its PETRI row repeats the main run's seed-0 numbers (same seed, same config)."""
    m, _ = check_smoke_report(smoke_run, "petri", "C1 C2 C3 C4 C5 H1 P1", files=["bodipy.png", "roc.png"])
    rows = m["sweep"]
    assert [(r["param"], r["value"], r["arm"]) for r in rows] == [
        (p, v, a) for p, v in (("S", 2.0), ("S", 4.0), ("mask", 0.5)) for a in ("petri", "permuted")
    ]
    same = rows[2]
    assert same["c1_gap"] == m["c1"]["petri"][0]["gap"]
    assert same["tpr_multimodal"] == m["profiles"]["petri"][0]["profiles"]["multimodal"]["tpr"]
    assert same["sae_multimodal"] == m["c2"]["petri"][0]
    assert same["final_loss"] == m["train_log"]["petri"][0][-1]["loss"]
    assert rows[0]["final_loss"] != same["final_loss"] and rows[4]["final_loss"] != same["final_loss"]
