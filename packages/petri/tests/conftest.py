import pytest


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)
