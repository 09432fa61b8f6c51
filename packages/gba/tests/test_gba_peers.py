"""The peer side-by-side degrades cleanly: a missing or mismatching library is a row, never a failure."""

from iclr26_core.cli import RunContext, compose
from iclr26_gba import peers


def test_peers_rows_for_missing_and_failing_libraries(tmp_path, monkeypatch):
    cfg = compose("iclr26_gba.conf", "reproduce", ["scale=smoke", "peers.steps=3"])
    ctx = RunContext(run_dir=tmp_path, device="cpu", seed=0, scale="smoke", log=lambda msg: None, slug="gba")
    monkeypatch.setattr(peers, "_available", lambda module: module == "sae_lens")

    def broken(*args, **kwargs):
        raise AttributeError("module 'sae_lens' has no attribute 'TopKTrainingSAE'")

    monkeypatch.setitem(peers.ADAPTERS, "sae-lens", broken)
    rows = peers.run_peers(cfg, ctx, ours={"gba": {"frr@0.8": 0.5, "frr@0.9": 0.25}})
    status = {r["peer"]: r["status"] for r in rows}
    # TopK at two K for the installed library; each failure is its own row, the run goes on
    assert set(status) == {"sae-lens TopK k=8", "sae-lens TopK k=16"}
    assert all(v.startswith("failed: AttributeError") for v in status.values())
    table = (tmp_path / "peers.md").read_text()
    assert "| iclr26-gba gba | ok | 0.5 | 0.25 |" in table
    assert "peers not installed: dictionary-learning, overcomplete" in table
