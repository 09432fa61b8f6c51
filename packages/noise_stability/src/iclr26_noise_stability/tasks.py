"""The algorithmic tasks of the paper's grokking experiments, as tensors with a fixed split.

* `modular_addition(p)`: every pair (a, b) ∈ [0, p)², input ``[a, b, =]`` (``=`` is token p, vocabulary
  p + 1), label (a + b) mod p, read out at the ``=`` position; only a and b are noised (positions 0, 1),
  and only to residues (support p: never to ``=``).
* `sparse_parity(n_bits, k)`: uniform bits (tokens 0/1), label = XOR of the first k bits, flipped with
  probability η (label noise); every bit position is noised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import NoiseStabilityError


@dataclass
class Task:
    """A classification task over token sequences: inputs [N, T] int64, labels [N] int64.

    ``positions`` are the content positions that token noise may change, ``support`` the ids a noised
    position may become; ``readout`` the output position whose logits predict the label; labels lie in
    [0, n_classes).
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    vocab_size: int
    n_classes: int
    positions: tuple[int, ...]
    readout: int = -1
    support: int | None = None  # noise resamples a position from ids [0, support) (None: the vocabulary)

    @property
    def seq_len(self) -> int:
        return int(self.x_train.shape[1])

    def describe(self) -> str:
        return (
            f"{self.name}: {len(self.x_train)} train / {len(self.x_val)} validation sequences of length "
            f"{self.seq_len}, vocabulary {self.vocab_size}, noised positions {list(self.positions)} "
            f"(resampled from {self.support or self.vocab_size} ids)"
        )


def modular_addition(p: int, train_fraction: float = 0.5, split_seed: int = 0) -> Task:
    """All p² pairs with label (a+b) mod p; a seeded random ``train_fraction`` of them is the training set."""
    if p < 2:
        raise NoiseStabilityError(f"the modulus p must be >= 2, got {p}")
    if not 0.0 < train_fraction < 1.0:
        raise NoiseStabilityError(f"train_fraction must be in (0, 1), got {train_fraction}")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    x = torch.stack([a, b, torch.full_like(a, p)], dim=1)
    y = (a + b) % p
    perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(split_seed))
    n_train = max(1, min(p * p - 1, round(train_fraction * p * p)))
    tr, va = perm[:n_train], perm[n_train:]
    return Task(f"modular addition p={p}", x[tr], y[tr], x[va], y[va], p + 1, p, (0, 1), -1, support=p)


def sparse_parity(
    n_bits: int = 30,
    k: int = 3,
    n_train: int = 1000,
    n_val: int = 1000,
    label_noise: float = 0.05,
    seed: int = 0,
) -> Task:
    """Noisy k-sparse parity: x ∈ {0,1}^n uniform, y = XOR(x_0..x_{k-1}) flipped w.p. ``label_noise``.

    Validation labels are clean (accuracy measures the parity itself).
    """
    if not 1 <= k <= n_bits:
        raise NoiseStabilityError(f"need 1 <= k <= n_bits, got k={k}, n_bits={n_bits}")
    if not 0.0 <= label_noise < 0.5:
        raise NoiseStabilityError(f"label_noise must be in [0, 0.5), got {label_noise}")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2, (n_train + n_val, n_bits), generator=gen)
    y = x[:, :k].sum(1) % 2
    flip = torch.rand(n_train, generator=gen) < label_noise
    y_train = torch.where(flip, 1 - y[:n_train], y[:n_train])
    return Task(
        f"{k}-sparse parity n={n_bits} (label noise {label_noise:g})",
        x[:n_train],
        y_train,
        x[n_train:],
        y[n_train:],
        2,
        2,
        tuple(range(n_bits)),
        -1,
    )


def task_model(
    task: Task, n_layer: int = 1, n_embd: int = 64, n_head: int = 4, n_inner: int = 256, seed: int = 0
):
    """A tiny randomly initialised GPT-2 (relu MLP, no dropout) sized for ``task``; via `iclr26_core.models`."""
    from iclr26_core.models import tiny_model

    return tiny_model(
        "gpt2",
        "tiny",
        seed=seed,
        vocab_size=task.vocab_size,
        n_positions=max(task.seq_len, 8),
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_inner=n_inner,
        activation_function="relu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    ).train()


class BitMLP(torch.nn.Module):
    """A one-hidden-layer ReLU MLP on token ids read as ±1 coordinates (token 0 → −1, 1 → +1): the standard
    architecture of sparse-parity studies. ``forward(input_ids [B, n]) -> logits [B, n_classes]``."""

    def __init__(self, n_bits: int, width: int = 256, n_classes: int = 2, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.hidden = torch.nn.Linear(n_bits, width)
            self.out = torch.nn.Linear(width, n_classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = input_ids.float() * 2.0 - 1.0
        return self.out(torch.relu(self.hidden(x)))
