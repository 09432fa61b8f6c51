"""The peers against independent computations (each skipped only when that peer is not installed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iclr26_petri.peers import gram_difference
from iclr26_petri.profiles import robust_center_scale, spherize


def test_profiles_match_pycytominer():
    pytest.importorskip("pycytominer")
    from iclr26_petri.peers import pycytominer_whitened

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6)) + 3
    obs = pd.DataFrame({"well": rng.integers(0, 3, 300)})
    control = rng.random(300) < 0.4
    ours = np.empty_like(x)
    for b in range(3):
        rows = obs["well"].to_numpy() == b
        ours[rows] = robust_center_scale(x[rows], control[rows])
    ours = spherize(ours, control)
    theirs = pycytominer_whitened(x, obs, control, "well")
    assert gram_difference(ours, theirs) < 1e-4


def _brute_force_map(prof: pd.DataFrame, gene_of: dict) -> float:
    """Mean over genes of the mean AP of its guides: rank the other guides by cosine similarity."""
    x = prof.to_numpy() / np.linalg.norm(prof.to_numpy(), axis=1, keepdims=True)
    sim = x @ x.T
    genes = np.array([gene_of[g] for g in prof.index])
    ap = []
    for i in range(len(x)):
        order = [j for j in np.argsort(-sim[i], kind="stable") if j != i]
        hits = genes[order] == genes[i]
        prec = np.cumsum(hits) / np.arange(1, len(hits) + 1)
        ap.append(prec[hits].mean())
    return float(pd.Series(ap).groupby(genes).mean().mean())


def test_copairs_map_matches_brute_force():
    pytest.importorskip("copairs")
    from iclr26_petri.peers import copairs_consistency

    rng = np.random.default_rng(1)
    genes = np.repeat([f"G{i}" for i in range(6)], 3)
    centre = {g: rng.normal(size=5) for g in set(genes)}
    guides = [f"g{i}" for i in range(len(genes))]
    prof = pd.DataFrame([centre[g] + rng.normal(scale=0.8, size=5) for g in genes], index=guides)
    prof.loc["ntc"] = rng.normal(size=5)
    gene_of = {**dict(zip(guides, genes, strict=True)), "ntc": "NTC"}
    res = copairs_consistency(prof, gene_of, null_size=200)
    assert res["map"] == pytest.approx(_brute_force_map(prof.drop("ntc"), gene_of), abs=1e-6)
    assert 0.0 <= res["fraction_significant"] <= 1.0


def test_copairs_activity_matches_brute_force():
    """Phenotypic activity: a guide's replicates are positives, the control replicates negatives; the mean AP
    per guide is checked against a direct ranking by cosine similarity."""
    pytest.importorskip("copairs")
    from iclr26_petri.peers import copairs_activity

    rng = np.random.default_rng(3)
    guides = ["a", "b", "c", "NTC0", "NTC1"]
    rows, index = [], []
    for g in guides:
        centre = np.zeros(6) if g.startswith("NTC") else rng.normal(scale=0.7, size=6)
        for w in range(4):
            rows.append(centre + rng.normal(size=6))
            index.append((g, f"w{w}"))
    rep = pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index))
    res = copairs_activity(rep, ["NTC0", "NTC1"], null_size=200)
    u = rep.to_numpy() / np.linalg.norm(rep.to_numpy(), axis=1, keepdims=True)
    labels = rep.index.get_level_values(0).to_numpy()
    ctrl = np.isin(labels, ["NTC0", "NTC1"])
    ap = {}
    for i in np.flatnonzero(~ctrl):
        cand = np.flatnonzero(((labels == labels[i]) | ctrl) & (np.arange(len(u)) != i))
        order = cand[np.argsort(-(u[cand] @ u[i]), kind="stable")]
        hits = labels[order] == labels[i]
        prec = np.cumsum(hits) / np.arange(1, len(hits) + 1)
        ap.setdefault(labels[i], []).append(prec[hits].mean())
    assert res["map"] == pytest.approx(np.mean([np.mean(v) for v in ap.values()]), abs=1e-6)
    assert 0.0 <= res["fraction_significant"] <= 1.0


def test_harmony_removes_a_well_shift():
    pytest.importorskip("harmonypy")
    from iclr26_petri.peers import harmony_corrected

    rng = np.random.default_rng(2)
    obs = pd.DataFrame({"well": np.repeat(["w0", "w1"], 200)})
    x = rng.normal(size=(400, 4))
    x[200:] += 3.0  # a pure batch shift
    z = harmony_corrected(x, obs)
    gap = lambda a: np.linalg.norm(a[:200].mean(0) - a[200:].mean(0))  # noqa: E731
    assert z.shape == x.shape
    assert gap(z) < 0.6 * gap(x)  # Harmony corrects softly: 6.0 -> 2.7 here
