"""scale=real at its smallest: SmolLM2-135M-Instruct, one prompt, 80 generated tokens (slow; not run by CI)."""

from __future__ import annotations

import pytest

from iclr26_core import testing
from iclr26_pmkvq.cli import main

SMALLEST = [
    "real.n_prompts=1",
    "real.new_tokens=80",
    "real.calib.samples=1",
    "real.calib.len=128",
    "real.random_allocations=1",
    "real.window=64",
    "real.generate_check=false",
    "bench_nbits=[2]",
]


@pytest.mark.slow
def test_real_scale_smallest_configuration(tmp_path):
    out = tmp_path / "real"
    _, m = testing.reproduce_real(main, out, "threads=1", *SMALLEST)
    r = m["real"]
    arms = {k: v["mean_kl"] for k, v in r["arms"].items()}
    claims = {c["id"]: c for c in m["claims"]}
    stronger = min(arms["fixed-2bit"], arms["kivi-2bit"])
    within = r["within_budget_2bit"] and r["c2_within_budget"]
    assert claims["C2"]["holds"] == (arms["pm-kvq whole pipeline (2bit budget)"] <= 0.8 * stronger and within)
    kl_random = sum(r["c3"]["kl_random"]) / len(r["c3"]["kl_random"])
    assert claims["C3"]["holds"] == (arms["allocator bits (fixed)"] <= kl_random)
    assert within and r["within_budget_mixed"]  # every block held its budget at every step
    assert sorted(set(r["c3"]["bits"])) == [2, 4] and r["c3"]["bits"].count(4) == 15
    for f in ("bits_per_block.png", "kl_per_step.png", "bench.md", "report.md"):
        assert (out / f).is_file()
