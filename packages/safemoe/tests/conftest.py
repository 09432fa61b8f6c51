"""Shared fixtures of the iclr26-safemoe tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def olmoe():
    from iclr26_safemoe.toy import tiny_olmoe

    return tiny_olmoe(seed=0)
