"""scale=real on SmolLM2-135M-Instruct, its smallest configuration (slow: loads the real model)."""

import pytest

from iclr26_calgacus.cli import main
from iclr26_core.testing import reproduce_real


@pytest.mark.slow
def test_reproduce_real_smallest(tmp_path, monkeypatch):
    monkeypatch.delenv("ICLR26_CACHE", raising=False)  # the user's cache: SmolLM2 is converted once there
    out = tmp_path / "run"
    _, m = reproduce_real(main, out, "n_cases=2", "secret_tokens=6", "judge_calib=4", "threads=1")
    rows = m["rows"]
    assert len(rows) == 4 and sum(r["hostile"] for r in rows) == 2
    # every cover went through a file and came back exactly; the record says which transport was used
    assert all(r["exact"] and r["equal_len"] for r in rows)
    for i, r in enumerate(rows):
        assert (out / "covers" / f"case{i:02d}.txt").read_bytes() == r["cover"].encode()
    c1 = next(c for c in m["claims"] if c["id"] == "C1")
    assert c1["holds"] is True
    c2 = next(c for c in m["claims"] if c["id"] == "C2")
    ratios = m["c2_logprob"]["ratio"]
    assert c2["holds"] == (sum(ratios) / len(ratios) >= 0.8)
    j = m["judge"]
    assert j["detected"] == sum(s < j["threshold"] for s in j["cover"])
    assert "SmolLM2" in (out / "report.md").read_text() or "smollm2" in (out / "report.md").read_text()
    assert (out / "examples.md").is_file()
