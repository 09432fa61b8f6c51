"""Shared fixtures of the iclr26-cave tests."""

from __future__ import annotations

import pytest

from iclr26_core.testing import torch_threads


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    with torch_threads(1):  # tiny tensors on a shared 2-core machine
        yield
