import pytest


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, monkeypatch):
    """Own cache and runs dir per session; no progress bars."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("ICLR26_CACHE", str(base / "cache"))
    monkeypatch.setenv("ICLR26_RUNS", str(base / "runs"))
    monkeypatch.setenv("ICLR26_PROGRESS", "0")


def pytest_collection_modifyitems(items):
    """The tiny token counts of these tests are deliberate: no 'capped by N' warning per call."""
    for item in items:
        if "packages/nerve/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.filterwarnings("ignore:N = .* capped by N"))
