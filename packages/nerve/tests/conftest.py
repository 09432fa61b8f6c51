import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Tiny models: one torch thread is fastest, and far faster than two on a shared 2-core machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, monkeypatch):
    """Own cache and runs dir per session; no progress bars."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("ICLR26_CACHE", str(base / "cache"))
    monkeypatch.setenv("ICLR26_RUNS", str(base / "runs"))
    monkeypatch.setenv("ICLR26_PROGRESS", "0")
