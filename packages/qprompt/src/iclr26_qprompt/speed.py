"""Speed: frames per second with everything that decides the number printed beside it, and FLOP overheads.

FPS depends on batch size, dtype, threads, ``torch.compile`` and on what is timed (tue-mps/eomt #50): every
`FPSReport` carries them. Timing: ``torch.inference_mode``, ``warmup`` untimed runs, then ``iters`` timed runs of
one batch; the median and the inter-quartile range of the milliseconds per batch. ``include_postprocess`` adds the
semantic post-processing (mask logits → label map at the input size) to the timed region.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class FPSReport:
    fps: float
    ms_median: float
    ms_iqr: float
    threads: int
    device: str
    dtype: str
    timed: str
    batch_size: int = 1
    compiled: bool = False


def measure_fps(
    model: Any,
    image_size: tuple[int, int],
    *,
    batch_size: int = 1,
    warmup: int = 5,
    iters: int = 30,
    include_postprocess: bool = True,
) -> FPSReport:
    """Images per second of ``model`` on random inputs [batch_size, 3, H, W] (see the module docstring)."""
    from .inference import postprocess

    param = next(model.parameters())
    x = torch.randn(batch_size, 3, *image_size, device=param.device, dtype=param.dtype)
    model.eval()
    times = []
    with torch.inference_mode():
        for i in range(warmup + iters):
            if param.device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(x)
            if include_postprocess:
                postprocess(out, tuple(image_size))
            if param.device.type == "cuda":
                torch.cuda.synchronize()
            if i >= warmup:
                times.append((time.perf_counter() - t0) * 1000)
    ms = np.asarray(times)
    median = float(np.median(ms))
    iqr = float(np.percentile(ms, 75) - np.percentile(ms, 25))
    timed = (
        f"forward{' + semantic post-processing' if include_postprocess else ''} of a random "
        f"{batch_size}x3x{image_size[0]}x{image_size[1]} batch under inference_mode; no pre-processing, "
        f"no torch.compile; median of {iters} runs after {warmup} warm-ups"
    )
    return FPSReport(
        fps=batch_size * 1000.0 / median,
        ms_median=median,
        ms_iqr=iqr,
        threads=torch.get_num_threads(),
        device=str(param.device),
        dtype=str(param.dtype).replace("torch.", ""),
        timed=timed,
        batch_size=batch_size,
    )


def count_flops(fn: Any, *args: Any) -> int:
    """FLOPs of ``fn(*args)`` by ``torch.utils.flop_counter`` (matmuls and convolutions)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def head_overhead(model: Any, image_size: tuple[int, int]) -> dict[str, float]:
    """FLOPs(full model + semantic post-processing) / FLOPs(backbone alone) − 1 at batch 1."""
    from .inference import postprocess
    from .model import backbone_forward

    model.eval()
    x = torch.randn(1, 3, *image_size)
    full = count_flops(lambda v: postprocess(model(v), tuple(image_size)), x)
    backbone = count_flops(lambda v: backbone_forward(model, v), x)
    return {"flops_full": full, "flops_backbone": backbone, "overhead": full / backbone - 1.0}
