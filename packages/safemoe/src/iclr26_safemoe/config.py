"""SafeMoE hyper-parameters (Kim, Song, Shin, Son, ICLR 2026; arXiv 2509.22745, OpenReview W1x9AzkSnU).

Defaults follow the official training scripts as summarised in the spec (Method step 6).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SafeMoEConfig:
    tau: float = (
        0.1  # softmax temperature of the routing-alignment KL (paper's setting; the argparse default is 1.0)
    )
    n_safe: int = 100  # N harmful instructions in D_s (first 100 of Bianchi et al.'s safety-only set)
    epochs: int = 3  # SFT epochs, each followed by a routing-alignment pass ("bi-level greedy")
    lr: float = 1e-4  # AdamW, cosine schedule
    warmup_ratio: float = 0.03
    weight_decay: float = 0.01
    batch_size: int = 32  # per-device batch x grad-accum; also the phase-(b) batch
    max_length: int = 512  # fine-tuning sequences (the reference routing uses 256)
    lora_r: int = 8  # LoRA rank; alpha 8 on q/v for OLMoE/Mixtral, 32 on q/k/v/o for Qwen-MoE/gpt-oss
    seed: int = 42
    schedule: str = "epoch"  # "step" is an ablation
