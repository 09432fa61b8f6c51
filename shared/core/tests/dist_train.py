"""Run by test_distributed.py under torchrun: each rank trains the same tiny llama with `train_lm` (gloo on CPU)
and writes its final weights and losses to OUT/rank<r>.safetensors / OUT/rank<r>.json.

    torchrun --standalone --nproc_per_node 2 dist_train.py OUT STEPS BATCH_SIZE
"""

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from iclr26_core.models import tiny_model
from iclr26_core.train import TrainConfig, train_lm


def data() -> torch.Tensor:
    return torch.randint(3, 99, (64, 16), generator=torch.Generator().manual_seed(7))


def config(steps: int, batch_size: int) -> TrainConfig:
    return TrainConfig(
        steps=steps, batch_size=batch_size, lr=1e-2, warmup_steps=1, progress=False, device="cpu"
    )


def model():
    return tiny_model(
        "llama", vocab_size=99, hidden_size=32, intermediate_size=48, num_hidden_layers=1, seed=3
    )


if __name__ == "__main__":
    import torch.distributed as dist

    out, steps, batch_size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    m = model()
    res = train_lm(m, data(), cfg=config(steps, batch_size))
    rank = dist.get_rank()
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(out / f"rank{rank}.safetensors"))
    info = {"rank": rank, "world": dist.get_world_size(), "backend": dist.get_backend(), "losses": res.losses}
    (out / f"rank{rank}.json").write_text(json.dumps(info))
