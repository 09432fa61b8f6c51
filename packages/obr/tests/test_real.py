"""scale=real at its smallest: SmolLM2-135M, one block, few tokens; verdicts recomputed from the metrics."""

from __future__ import annotations

import pytest

from iclr26_core import testing
from iclr26_obr.cli import main


@pytest.mark.slow
def test_reproduce_real_smallest(tmp_path):
    out = tmp_path / "run"
    res, _ = testing.reproduce_real(
        main,
        out,
        "threads=1",
        "real.blocks=[0]",
        "real.seq_len=128",
        "real.nsamples=2",
        "real.eval_blocks=2",
        "real.peers=false",
    )
    m, claims = testing.check_smoke_report(
        (out, res), "obr", ["C1", "C4", "C5"], files=["real.md"], scale="real"
    )
    real = m["real"]
    d = {s: {k: r["dppl"] for k, r in rows.items()} for s, rows in real["settings"].items()}
    u, nm = d["W4+50%"], d["W4+2:4"]
    assert claims["C1"]["holds"] == (
        u["obr_gptq"] <= 0.9 * u["sparsegpt_gptq"]
        and u["obr_rtn"] < u["sparsegpt_gptq"]
        and max(u["obr_gptq"], u["obr_rtn"]) <= 0.5 * u["wanda_rtn"]
    )
    assert claims["C4"]["holds"] == (nm["obr_gptq"] <= 0.92 * nm["sparsegpt_gptq"])
    assert claims["C5"]["holds"] == (
        u["obr_gptq"] < u["sparsegpt_gptq"] and u["obr_gptq"] <= 0.75 * u["wanda_rtn"]
    )
    for rows in real["settings"].values():
        for r in rows.values():
            assert abs(r["sparsity"] - 0.5) < 0.01 and r["ppl"] > real["ppl_dense"] * 0.9
