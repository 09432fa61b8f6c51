"""C6's verdict is its rule (vs NF4), and the ranking of every variant is reported beside it."""

from __future__ import annotations

from iclr26_bof4.claims import claim_c6


def _arm(dppl: dict[str, float], mse: dict[str, float]) -> dict:
    return {
        "weight_mse": mse,
        "delta_ppl": dppl,
        "ppl_fp": 30.0,
        "seeds": [0, 1],
        "paired_diff": {"mean": -0.02, "sd": 0.05, "se": 0.035, "n": 2},
    }


def test_c6_holds_on_its_rule_and_reports_the_rank():
    dppl = {"nf4": 0.22, "af4": 0.23, "bof4-mse": 0.18, "bof4s-mse": 0.19, "bof4s-mse+opq": 0.196}
    mse = {"nf4": 1.0, "bof4s-mse+opq": 0.82}
    claim = claim_c6({"headline": {"tiny": _arm(dppl, mse)}})
    assert claim.holds  # below NF4 on both parts, although not the lowest of all
    assert claim.measured["dPPL ranking"] == "bof4-mse < bof4s-mse < bof4s-mse+opq < nf4 < af4"
    assert claim.measured["rank of BOF4-S+OPQ"] == "3 of 5"
    assert "less than NF4" in claim.claim


def test_c6_fails_when_nf4_degrades_less():
    dppl = {"nf4": 0.18, "bof4s-mse+opq": 0.19}
    claim = claim_c6({"headline": {"tiny": _arm(dppl, {"nf4": 1.0, "bof4s-mse+opq": 0.8})}})
    assert not claim.holds and claim.measured["rank of BOF4-S+OPQ"] == "2 of 2"
