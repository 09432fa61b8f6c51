"""Shared fixtures of the iclr26-cave tests."""

from __future__ import annotations

import pytest

from iclr26_core.testing import torch_threads


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    with torch_threads(1):  # tiny tensors on a shared 2-core machine
        yield


def pytest_configure(config):
    config.addinivalue_line("markers", "peers: needs the peers extra (pip install iclr26-cave[peers])")


def pytest_collection_modifyitems(config, items):
    import importlib.util

    missing = [m for m in ("zennit",) if importlib.util.find_spec(m) is None]
    if not missing:
        return
    skip = pytest.mark.skip(
        reason=f"peers not installed: {', '.join(missing)} (pip install iclr26-cave[peers])"
    )
    for item in items:
        if "peers" in item.keywords:
            item.add_marker(skip)
