import os

import pytest


@pytest.fixture(scope="session")
def calgacus_cache(tmp_path_factory):
    """One temporary ICLR26_CACHE for the whole session: the smoke tiny LM is trained once into it."""
    path = tmp_path_factory.mktemp("iclr26_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR26_CACHE", str(path))
    mp.setenv("ICLR26_PROGRESS", "0")
    yield path
    mp.undo()


@pytest.fixture(autouse=True)
def _isolated_cache(calgacus_cache, monkeypatch):
    monkeypatch.setenv("ICLR26_CACHE", str(calgacus_cache))
    os.environ.setdefault("ICLR26_PROGRESS", "0")


@pytest.fixture(scope="session")
def tiny_smoke(calgacus_cache):
    from iclr26_calgacus.tiny import load_tiny

    return load_tiny("smoke", progress=False)
