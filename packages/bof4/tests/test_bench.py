"""The summarised bench: ratios against NF4 recomputed by hand, the CSV, failing/unavailable peers, bnb codes."""

from __future__ import annotations

import csv
import io

import pytest
import torch

from iclr26_bof4 import bench as bench_mod
from iclr26_bof4 import peers as peers_mod
from iclr26_bof4.bench import rows_csv, run_bench, summary_table


def _tensors():
    gen = torch.Generator().manual_seed(7)
    yield "a", "t1", torch.randn(64, 128, generator=gen)
    yield "a", "t2", torch.randn(32, 64, generator=gen) * 3
    yield "b", "t3", torch.randn(5, 77, generator=gen)


def test_summary_ratios_pool_squared_errors_over_each_group():
    res = run_bench(_tensors(), peers=())
    rows = res["rows"]
    by = {(r["method"], r["tensor"]): r for r in rows}
    for s in res["summary"]:
        m = s["method"]
        for group, tensors in (("a", ["t1", "t2"]), ("b", ["t3"])):
            se = sum(by[(m, t)]["mse"] * by[(m, t)]["numel"] for t in tensors)
            ref = sum(by[("nf4", t)]["mse"] * by[("nf4", t)]["numel"] for t in tensors)
            assert s["groups"][group]["mse_rel"] == pytest.approx(se / ref, rel=1e-12)
        n = sum(by[(m, t)]["numel"] for t in ("t1", "t2", "t3"))
        bits = sum(by[(m, t)]["bits_per_weight"] * by[(m, t)]["numel"] for t in ("t1", "t2", "t3")) / n
        assert s["bits_per_weight"] == pytest.approx(bits)
    ours = {s["method"]: s for s in res["summary"]}
    assert ours["nf4"]["groups"]["a"]["mse_rel"] == 1.0
    assert ours["bof4s-mse"]["groups"]["a"]["mse_rel"] < 0.92  # Gaussian weights: BOF4-S well below NF4
    table = summary_table(res["summary"], res["groups"])
    assert table.count("\n") == len(res["summary"]) + 1  # one row per method, not per tensor
    assert "MSE/NF4 a" in table and "MAE/NF4 b" in table


def test_csv_has_one_row_per_tensor_and_method():
    res = run_bench(_tensors(), peers=())
    parsed = list(csv.DictReader(io.StringIO(rows_csv(res["rows"], res["group_of"]))))
    assert len(parsed) == len(res["rows"]) == 3 * 7  # nf4, af4, bof4-mse, bof4s-mse, bof4s-mae, +opq, affine
    assert {r["group"] for r in parsed} == {"a", "b"}
    assert float(parsed[0]["mse"]) > 0


def test_failing_and_unavailable_peers_are_one_note_each(monkeypatch):
    def flaky():
        def run(w, block_size):
            if w.numel() == 5 * 77:
                raise ValueError("odd size")
            return w.clone(), 16.0

        return run

    def broken():
        raise ImportError("no CPU backend")

    monkeypatch.setitem(peers_mod.PEERS, "flaky", flaky)
    monkeypatch.setitem(peers_mod.PEERS, "broken", broken)
    res = run_bench(_tensors(), peers=("flaky", "broken"))
    by = {s["method"]: s for s in res["summary"]}
    assert by["flaky"]["failed"] == 1 and "failed on 1 tensors (ValueError: odd size)" in by["flaky"]["note"]
    assert by["flaky"]["groups"]["a"]["mse_rel"] == 0.0 and "b" not in by["flaky"]["groups"]
    assert by["broken"]["note"] == "unavailable: ImportError: no CPU backend"
    assert by["broken"]["bits_per_weight"] is None


def test_nf4_codes_agree_with_bitsandbytes():
    w = torch.randn(96, 200, generator=torch.Generator().manual_seed(11))
    equal, n = bench_mod.nf4_code_agreement(w, 64)
    assert n == w.numel() and equal / n >= 0.9999
    res = run_bench(iter([("g", "w", w)]), peers=("bitsandbytes-nf4",))
    assert res["agreement"]["weights"] == w.numel() and res["agreement"]["fraction"] >= 0.9999
    assert "NF4 codes equal to bitsandbytes'" in bench_mod.agreement_line(res["agreement"])
