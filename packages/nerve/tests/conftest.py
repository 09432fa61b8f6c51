import pytest


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, monkeypatch):
    """Own cache and runs dir per session; no progress bars."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("ICLR26_CACHE", str(base / "cache"))
    monkeypatch.setenv("ICLR26_RUNS", str(base / "runs"))
    monkeypatch.setenv("ICLR26_PROGRESS", "0")
