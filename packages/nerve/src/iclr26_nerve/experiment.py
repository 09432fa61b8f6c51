"""The miniature training study behind the claims: tiny GPT-2 arms on pydoc text, NerVE every k steps.

Setup (spec "Claims to reproduce in miniature"; paper §5 at GPT-2 125M scale): a character-level GPT-2
(n_layer 4, n_embd 64, n_head 4, n_inner 256, context 64) trained with AdamW (lr 1e-3, weight decay 0.1,
grad-clip 1, the recipe of the scale config) on the pydoc topics split 90/10 by topic. A fixed held-out
probe batch (32×64 = 2048 tokens = 8·D) is measured at step 1 and every ``log_steps`` steps, together with
the held-out loss. Arms (`variants.build_gpt2`; "official" = the official NerVE block, `blocks`):

* ``preln_gelu``       official block, PreLN, GELU (exact): the paper's PreLN
* ``normfree_gelu``    official block, ln_1/ln_2 → identity (ln_f kept), GELU
* ``normfree_relu``    the same with ReLU
* ``preln_gelu_stock`` stock GPT-2 (``GPT2Block``, gelu_new, biases, scaled c_proj init): an arm
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from .analysis import analyze
from .callback import NerVECallback
from .variants import build_gpt2, restore_activation, set_activation

ARMS: dict[str, dict[str, str]] = {
    "preln_gelu": {"block": "official", "norm_position": "pre", "activation": "gelu"},
    "normfree_gelu": {"block": "official", "norm_position": "free", "activation": "gelu"},
    "normfree_relu": {"block": "official", "norm_position": "free", "activation": "relu"},
    "preln_gelu_stock": {"block": "stock", "norm_position": "pre", "activation": "gelu_new"},
}


@dataclass
class CharData:
    tokenizer: Any
    train: torch.Tensor  # [n, T]
    probe: torch.Tensor  # [probe_blocks, T] fixed held-out batch
    eval: torch.Tensor  # [m, T] held-out blocks for the loss (disjoint from the probe)


@functools.lru_cache(maxsize=4)
def char_data(
    seq_len: int = 64,
    probe_blocks: int = 32,
    eval_blocks: int = 128,
    val_fraction: float = 0.1,
    split_seed: int = 0,
) -> CharData:
    """pydoc text with a character tokenizer, split by topic; cut into [n, seq_len] blocks."""
    from iclr26_core.corpus import pydoc_dataset
    from iclr26_core.tokenizers import char_tokenizer

    ds = pydoc_dataset(val_fraction=val_fraction, seed=split_seed)
    alphabet = "".join(sorted(set("".join(ds["train"]["text"]))))
    tok = char_tokenizer(alphabet)
    train = char_blocks(ds["train"]["text"], tok, seq_len)
    val = char_blocks(ds["validation"]["text"], tok, seq_len)
    if len(val) < probe_blocks + 1:
        raise ValueError(f"only {len(val)} held-out blocks of {seq_len}; need more than {probe_blocks}")
    return CharData(tok, train, val[:probe_blocks], val[probe_blocks : probe_blocks + eval_blocks])


def unigram_loss(data: CharData) -> float:
    """Held-out loss (nats per token) of the unigram model of the training text (add-one smoothing), on the
    tokens the LM loss scores (positions 1..T-1 of each held-out block): the plateau a model leaves when it
    starts to use context."""
    counts = torch.bincount(data.train[:, 1:].flatten(), minlength=len(data.tokenizer)).double() + 1.0
    logp = (counts / counts.sum()).log()
    return float(-logp[data.eval[:, 1:].flatten()].mean())


def char_blocks(texts: list[str], tokenizer: Any, seq_len: int) -> torch.Tensor:
    """`iclr26_core.corpus.token_blocks` for a character tokenizer, as a direct vocabulary lookup.

    Same result (texts joined by eos, cut into [n, seq_len], tail dropped; unknown characters → unk),
    about 200× faster than running the tokenizer's regex pre-tokenizer over the corpus.
    """
    vocab = tokenizer.get_vocab()
    unk, eos = tokenizer.unk_token_id, tokenizer.eos_token_id
    ids: list[int] = []
    for text in texts:
        ids.extend(vocab.get(c, unk) for c in text)
        ids.append(eos)
    n = len(ids) // seq_len
    return torch.tensor(ids[: n * seq_len], dtype=torch.long).view(n, seq_len)


SCHEDULES = ("constant", "cosine", "linear")
DECAY = ("all", "matrices")


def lr_multiplier(step: int, *, schedule: str, steps: int, warmup_steps: int, min_lr_ratio: float) -> float:
    """Multiplier of the base lr at optimizer step ``step`` (0-based): linear warmup over ``warmup_steps``,
    then ``constant`` (1), ``cosine`` (to ``min_lr_ratio``) or ``linear`` (to ``min_lr_ratio``; with 0 it is
    `transformers`' "polynomial" decay of power 1, the paper's schedule)."""
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min((step - warmup_steps) / max(steps - warmup_steps, 1), 1.0)
    if schedule == "cosine":
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return min_lr_ratio + (1 - min_lr_ratio) * (1 - progress)


def make_optimizer(net, *, lr: float, weight_decay: float, betas: tuple[float, float], decay: str):
    """AdamW; ``decay="matrices"`` decays only ≥ 2-D weights (no decay on biases and LayerNorm gains, as
    `transformers.Trainer` and nanoGPT do), ``"all"`` decays every parameter (torch's default)."""
    params = [p for p in net.parameters() if p.requires_grad]
    if decay == "all":
        groups = [{"params": params, "weight_decay": weight_decay}]
    else:
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


def overhead(measure_seconds: list[float], stamps: list[float], log_steps: int) -> dict:
    """The callback's cost: median seconds of one NerVE measurement against the median interval between
    optimizer steps (most intervals hold one training step only; those after a due step also hold the
    measurement and the held-out evaluation, which the median ignores)."""
    if not measure_seconds or len(stamps) < 3:
        return {}
    step = statistics.median(b - a for a, b in itertools.pairwise(stamps))
    measure = statistics.median(measure_seconds)
    return {
        "measure_s": measure,
        "step_s": step,
        "ratio": measure / step,
        "percent_at_log_steps": 100 * measure / (measure + log_steps * step),
    }


def train_arm(
    arm: str,
    seed: int,
    data: CharData,
    *,
    model: dict,
    steps: int,
    log_steps: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    warmup_steps: int,
    grad_clip: float,
    betas: tuple[float, float] = (0.9, 0.999),
    schedule: str = "constant",
    min_lr_ratio: float = 0.0,
    decay: str = "matrices",
    device: str = "cpu",
    desc: str | None = None,
    progress: bool = True,
    position: int | None = None,
    identity_control: bool = False,
    keep_state: bool = False,
) -> dict:
    """Train one arm; returns its NerVE trajectory, held-out losses and final spectra.

    ``keep_state``: also return the ``c_fc`` weights at every measured step (``snapshots``) and the final
    ``state_dict`` (tensors, for the peers; not for metrics.json).
    """
    from iclr26_core.errors import TrainingDiverged
    from iclr26_core.train import TrainConfig, train_lm

    net = build_gpt2(vocab_size=len(data.tokenizer), seed=seed, **model, **ARMS[arm]).to(device)
    probe = data.probe.to(device)
    init = analyze(net, probe, keep_eigenvalues=False)
    cb = NerVECallback(probe=probe, log_steps=log_steps)
    snapshots: list = []
    if keep_state:
        cb.on_measure = lambda m, step: snapshots.append(
            (
                step,
                {k: v.detach().cpu().clone() for k, v in m.state_dict().items() if k.endswith("c_fc.weight")},
            )
        )
    cfg = TrainConfig(
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        warmup_steps=warmup_steps,
        grad_clip=grad_clip,
        eval_every=log_steps,
        eval_batches=math.ceil(len(data.eval) / batch_size),
        seed=seed,
        device=device,
        progress=progress,
        desc=desc or f"{arm} seed {seed}",
        position=position,
    )
    optimizer = make_optimizer(net, lr=lr, weight_decay=weight_decay, betas=betas, decay=decay)

    def mult(step: int) -> float:
        return lr_multiplier(
            step, schedule=schedule, steps=steps, warmup_steps=warmup_steps, min_lr_ratio=min_lr_ratio
        )

    hook = cb.step_hook(net)
    stamps: list[float] = []

    def on_step(step: int, loss: float) -> None:
        stamps.append(time.perf_counter())  # before the measurement: intervals time one training step
        hook(step, loss)

    diverged, evals = "", {}
    try:
        result = train_lm(
            net, data.train, data.eval, cfg, optimizer=optimizer, lr_schedule=mult, on_step=on_step
        )
        evals = dict(result.evals)
    except TrainingDiverged as exc:
        diverged = str(exc)
    trajectory = []
    for step in cb.measured_steps:
        layers = [{k: v for k, v in r.items() if k != "step"} for r in cb.history if r["step"] == step]
        trajectory.append({"step": step, "eval_loss": evals.get(step, float("nan")), "layers": layers})
    out = {
        "arm": arm,
        "seed": seed,
        "diverged": diverged,
        "init": [m.to_dict() for m in init.layers],
        "trajectory": trajectory,
        "final_loss": evals.get(steps, float("nan")),
        "overhead": overhead(cb.seconds, stamps, log_steps),
    }
    if keep_state:
        out["snapshots"] = snapshots
        out["state_dict"] = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    if not diverged:
        final = analyze(net, probe)
        out["final"] = [m.to_dict() for m in final.layers]
        out["eigenvalues"] = {str(k): v for k, v in final.eigenvalues.items()}
        if identity_control:
            old = set_activation(net, torch.nn.Identity())
            try:
                ctrl = analyze(net, probe, keep_eigenvalues=False)
            finally:
                restore_activation(net, old)
            out["identity_control"] = {
                "max_abs_pr_gain_minus_1": max(abs(m.pr_gain - 1) for m in ctrl.layers),
                "max_js": max(m.js for m in ctrl.layers),
            }
    return out
