import os

import pytest

os.environ.setdefault("ICLR26_PROGRESS", "0")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Small tensors: one intra-op thread is much faster on a shared 2-core CPU."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
