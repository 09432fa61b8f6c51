"""Shared fixtures of the iclr26-sprig tests."""

from __future__ import annotations

from iclr26_core.testing import one_thread_fixture

_one_thread = one_thread_fixture()  # tiny tensors on a shared 2-core machine
