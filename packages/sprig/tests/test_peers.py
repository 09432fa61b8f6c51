"""The peers bench: every installed peer runs on the same fitness, within the same budget."""

from __future__ import annotations

from iclr26_sprig.oracle import OracleLLM
from iclr26_sprig.peers import PEERS, bench, decode, installed


def test_decode_genome():
    o = OracleLLM(n_tasks=6, n_components=40, seed=0)
    p = decode([3, 40, 3, 7, 40], o.components)
    assert p.ids == (o.components[3].id, o.components[7].id)


def test_bench_rows_within_budget():
    o = OracleLLM(n_tasks=6, n_components=40, seed=0)
    budget = 6 * 10 * 60
    rows = bench(lambda k: o.fitness(10, 1, k), o.components, o.true_mean, budget, population=8)
    assert [r["peer"] for r in rows] == list(PEERS)
    for r in rows:
        if not installed(r["peer"]):
            assert "not installed" in r["note"] and r["accuracy"] is None
            continue
        assert 0 < r["evaluations"] <= budget, r
        assert 0.25 <= r["accuracy"] <= 1.0 and r["length"] >= 1
