"""Shared fixtures of the iclr26-delivr tests."""

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
