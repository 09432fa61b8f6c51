"""`one_thread_fixture`: the autouse fixture a package's conftest assigns (here with 2 threads, module scope)."""

import torch

from iclr26_core.testing import one_thread_fixture

_two_threads = one_thread_fixture(2, scope="module")  # every test of this module runs under it


def test_one_thread_fixture_sets_the_torch_threads():
    assert torch.get_num_threads() == 2
