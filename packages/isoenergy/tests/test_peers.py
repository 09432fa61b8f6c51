"""The peers: agreement with our MP-SAE on the same pairs, and a missing peer as one line."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from iclr26_isoenergy import IsoEnergyToy
from iclr26_isoenergy.peers import maybe_peers, missing_line


def _cfg():
    return SimpleNamespace(
        get=lambda key, default=None: {"peers": True}.get(key, default),
        sae=SimpleNamespace(n_atoms=32, k=3),
        train=SimpleNamespace(batch_pairs=50, lr=5e-3),
        eval=SimpleNamespace(wasserstein_n=40),
        seed=0,
    )


def _cell():
    toy = IsoEnergyToy(d=16, n_shared=8, n_image=2, n_text=2, seed=2)
    img, txt = toy.sample(200, seed=0)
    ei, et = toy.sample(64, seed=1)
    return {"_data": (img, txt, ei, et), "sae": {"r2": 0.5, "l0": 3.0, "seconds": 1.0, "epochs": 1}}


def test_missing_peers_are_one_line(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("ot", "overcomplete", "sae_lens") else real(name, *a),
    )
    reported = []
    ctx = SimpleNamespace(run_dir=tmp_path, log=lambda msg: None, peers_missing=reported.extend)
    out = maybe_peers(_cfg(), ctx, _cell())
    assert reported == ["overcomplete", "sae-lens", "pot"] and out["rows"] == [] and out["pot"] is None
    text = (tmp_path / "peers.md").read_text()
    assert missing_line(reported) in text and "pip install iclr26-isoenergy[peers]" in text


@pytest.mark.slow  # imports sae-lens / transformer-lens (~10 s); `reproduce` runs the peers by default
def test_installed_peers_agree_with_ours(tmp_path):
    pytest.importorskip("ot")  # the peers are in the workspace's dev group
    cell = _cell()
    logs = []
    ctx = SimpleNamespace(run_dir=tmp_path, log=logs.append, peers_missing=lambda names: logs.extend(names))
    out = maybe_peers(_cfg(), ctx, cell)
    assert out["pot"]["abs_diff"] < 1e-9
    rows = {r["peer"].split(" k=")[0]: r for r in out["rows"]}
    for name in ("overcomplete MpSAE", "sae-lens MatchingPursuitTrainingSAE"):
        if importlib.util.find_spec(name.split()[0].replace("-", "_")) is not None:
            assert rows[name]["status"] == "ok", rows[name]
            assert 0.0 < rows[name]["l0"] <= 3.0
    assert torch.isfinite(torch.tensor([r["r2"] for r in out["rows"] if r["status"] == "ok"])).all()
