"""Shared fixtures of the iclr26-safemoe tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """Small tensors only: one intra-op thread avoids OpenMP spin-waiting on a shared 2-core machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def olmoe():
    from iclr26_safemoe.toy import tiny_olmoe

    return tiny_olmoe(seed=0)
