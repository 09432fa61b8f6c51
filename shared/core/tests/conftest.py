import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the fixture_paper package


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own runs dir; the tokenizer cache is shared within the session."""
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("ICLR26_PROGRESS", "0")
