"""Sparse autoencoders: the paper's tied SAE, and the TopK / L1 baselines it is compared with.

All SAEs work on inputs rescaled once by a stored scalar ``input_scale`` so that the mean ‖x‖ is 1
(this is what makes the bias range [−1, 0] of bias adaptation meaningful); ``encode``/``decode``/``forward``
take and return activations in the caller's units. Shapes: x [B, d], pre-activations and codes [B, M].

Tied SAE (the paper's, M neurons, rows w_m of W ∈ R^{M×d}, output scales a ∈ R^M, neuron bias b ∈ R^M,
pre-bias b_pre ∈ R^d), on rescaled inputs x:

    u = (x − b_pre) Wᵀ           y = u + b                 (pre-activation, [B, M])
    z = ReLU(y)                   or  z = u ⊙ 1[u + b > 0]  (activation="jumprelu": b acts as a threshold)
    x̂ = (z ⊙ a) W + b_pre

``b`` is a buffer (no gradient): only bias adaptation moves it. ``b_pre`` is a frozen buffer by default.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .config import ACTIVATIONS, PRE_BIASES
from .errors import GBAError
from .seeding import generator

WEIGHTS = "sae.safetensors"
CONFIG = "sae_config.json"


class _SAE(nn.Module):
    """Shared plumbing: input scaling, shape checks, decoder directions, save/load."""

    kind = "base"

    def __init__(self, d: int, n_neurons: int, learn_pre_bias: bool = False) -> None:
        super().__init__()
        if int(d) < 1 or int(n_neurons) < 1:
            raise GBAError(f"d and n_neurons must be >= 1, got d={d}, n_neurons={n_neurons}")
        self.d, self.n_neurons = int(d), int(n_neurons)
        self.register_buffer("input_scale", torch.ones(()))
        if learn_pre_bias:
            self.b_pre = nn.Parameter(torch.zeros(self.d))
        else:
            self.register_buffer("b_pre", torch.zeros(self.d))
        self.meta: dict[str, Any] = {}

    # -- helpers -------------------------------------------------------------------------------------
    def check_input(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise GBAError(f"expected a tensor of activations, got {type(x).__name__}")
        if x.ndim != 2 or x.shape[-1] != self.d:
            raise GBAError(f"data has shape {tuple(x.shape)} but the SAE expects [N, {self.d}] (d={self.d})")
        return x.to(self.input_scale.dtype)

    @torch.no_grad()
    def set_input_stats(self, x: torch.Tensor, pre_bias: str = "mean") -> None:
        """Scale so that the mean ‖x‖ of ``x`` [N, d] becomes 1; b_pre = mean of the rescaled rows
        (``pre_bias="mean"``) or 0 (``"zero"``: no centring, the statistical model's origin)."""
        if pre_bias not in PRE_BIASES:
            raise GBAError(f"unknown pre_bias {pre_bias!r}; choose one of {', '.join(PRE_BIASES)}")
        x = self.check_input(x)
        norm = x.norm(dim=1).mean()
        if not torch.isfinite(norm) or norm <= 0:
            raise GBAError("cannot scale the data: the activations are all zero or not finite")
        self.input_scale.fill_(1.0 / float(norm))
        if pre_bias == "mean":
            self.b_pre.copy_((x * self.input_scale).mean(0))
        else:
            self.b_pre.zero_()

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """y [B, M] for raw x [B, d]."""
        return self._pre(self.check_input(x) * self.input_scale)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """z [B, M] for raw x [B, d]."""
        return self._encode_scaled(self.check_input(x) * self.input_scale)[0]

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """x̂ [B, d] in the caller's units."""
        return self._decode_scaled(z) / self.input_scale

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x̂ [B, d], z [B, M]) for raw x."""
        z = self.encode(x)
        return self.decode(z), z

    def forward_scaled(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x̂_s, z, y) on already rescaled inputs x_s [B, d]: what the training loop uses."""
        z, y = self._encode_scaled(xs)
        return self._decode_scaled(z), z, y

    def decoder_directions(self) -> torch.Tensor:
        """[M, d] unit decoder directions d_m (what FRR and MCC score)."""
        w = self._decoder_weight().detach()
        return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def normalize_(self) -> None:
        """Project the rows of the (decoder) dictionary onto the unit sphere."""
        w = self._decoder_weight()
        w.div_(w.norm(dim=1, keepdim=True).clamp_min(1e-12))

    # -- to implement ----------------------------------------------------------------------------------
    def _pre(self, xs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _encode_scaled(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _decode_scaled(self, z: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _decoder_weight(self) -> torch.Tensor:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "d": self.d,
            "n_neurons": self.n_neurons,
            "learn_pre_bias": isinstance(self.b_pre, nn.Parameter),
        }

    # -- persistence -----------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write ``sae.safetensors`` + ``sae_config.json`` into ``directory`` (atomic; never overwrites)."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name in (WEIGHTS, CONFIG):
            if (directory / name).exists():
                raise GBAError(f"{directory / name} already exists; choose a new directory")
        tensors = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        fd, tmp = tempfile.mkstemp(prefix=f".{WEIGHTS}.", dir=directory)
        os.close(fd)
        try:
            save_file(tensors, tmp)
            os.replace(tmp, directory / WEIGHTS)
        finally:
            Path(tmp).unlink(missing_ok=True)
        from iclr26_core.fs import write_json

        write_json(directory / CONFIG, {**self.config(), **self.meta})
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str = "cpu") -> _SAE:
        """Read an SAE written by `save` (the class is taken from ``kind`` in the config)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        directory = Path(directory)
        if not (directory / WEIGHTS).is_file() or not (directory / CONFIG).is_file():
            raise GBAError(f"{str(directory)!r} is not a saved SAE (needs {WEIGHTS} and {CONFIG})")
        try:
            cfg = json.loads((directory / CONFIG).read_text())
            state = load_file(str(directory / WEIGHTS), device=device)
        except (json.JSONDecodeError, SafetensorError, OSError) as exc:
            raise GBAError(f"SAE at {str(directory)!r} is corrupt ({str(exc).splitlines()[0]})") from None
        kinds = {c.kind: c for c in (TiedSAE, TopKSAE, L1SAE)}
        if cfg.get("kind") not in kinds:
            raise GBAError(f"SAE at {str(directory)!r} has unknown kind {cfg.get('kind')!r}")
        sae = kinds[cfg["kind"]]._from_config(cfg)
        try:
            sae.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise GBAError(
                f"SAE at {str(directory)!r} does not match its config ({str(exc).strip().splitlines()[0]})"
            ) from None
        known = set(sae.config())
        sae.meta = {k: v for k, v in cfg.items() if k not in known}
        return sae.to(device)


class TiedSAE(_SAE):
    """The paper's tied SAE with M neurons (see the module docstring for the equations).

    Parameters: ``W`` [M, d] (unit rows at init), ``a`` [M] (ones). Buffers: ``b`` [M] (zeros; moved only
    by bias adaptation), ``b_pre`` [d], ``input_scale`` [].
    """

    kind = "tied"

    def __init__(
        self,
        d: int,
        n_neurons: int,
        activation: str = "relu",
        learn_pre_bias: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(d, n_neurons, learn_pre_bias)
        if activation not in ACTIVATIONS:
            raise GBAError(f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}")
        self.activation = activation
        g = generator(int(seed), "sae-init") if seed is not None else None
        w = torch.randn(self.n_neurons, self.d, generator=g)
        self.W = nn.Parameter(w / w.norm(dim=1, keepdim=True))
        self.a = nn.Parameter(torch.ones(self.n_neurons))
        self.register_buffer("b", torch.zeros(self.n_neurons))

    @classmethod
    def _from_config(cls, cfg: dict) -> TiedSAE:
        return cls(
            cfg["d"], cfg["n_neurons"], cfg.get("activation", "relu"), cfg.get("learn_pre_bias", False)
        )

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "activation": self.activation,
            "tied": True,
            "adapted_bias": "b: the neuron bias added to the pre-activation (x - b_pre) W^T; "
            "moved only by (group) bias adaptation, never by the optimiser",
        }

    def _pre(self, xs: torch.Tensor) -> torch.Tensor:
        return (xs - self.b_pre) @ self.W.T + self.b

    def _encode_scaled(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = (xs - self.b_pre) @ self.W.T
        y = u + self.b
        z = torch.relu(y) if self.activation == "relu" else u * (y > 0)
        return z, y

    def _decode_scaled(self, z: torch.Tensor) -> torch.Tensor:
        return (z * self.a) @ self.W + self.b_pre

    def _decoder_weight(self) -> torch.Tensor:
        return self.W


class _Untied(_SAE):
    def __init__(self, d: int, n_neurons: int, learn_pre_bias: bool = True, seed: int | None = None) -> None:
        super().__init__(d, n_neurons, learn_pre_bias)
        g = generator(int(seed), "sae-init") if seed is not None else None
        w = torch.randn(self.n_neurons, self.d, generator=g)
        w = w / w.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(w.clone())
        self.W_enc = nn.Parameter(w.clone())  # encoder initialised as the decoder's transpose
        self.b_enc = nn.Parameter(torch.zeros(self.n_neurons))

    def _pre(self, xs: torch.Tensor) -> torch.Tensor:
        return (xs - self.b_pre) @ self.W_enc.T + self.b_enc

    def _decode_scaled(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.W_dec + self.b_pre

    def _decoder_weight(self) -> torch.Tensor:
        return self.W_dec


class TopKSAE(_Untied):
    """Baseline: untied, unit-norm decoder rows, z = TopK(ReLU(W_e(x − b_pre) + b_e)), no AuxK."""

    kind = "topk"

    def __init__(
        self, d: int, n_neurons: int, k: int, learn_pre_bias: bool = True, seed: int | None = None
    ) -> None:
        super().__init__(d, n_neurons, learn_pre_bias, seed)
        if not 1 <= int(k) <= self.n_neurons:
            raise GBAError(f"k must be in [1, n_neurons={self.n_neurons}], got {k}")
        self.k = int(k)

    @classmethod
    def _from_config(cls, cfg: dict) -> TopKSAE:
        return cls(cfg["d"], cfg["n_neurons"], cfg["k"], cfg.get("learn_pre_bias", True))

    def config(self) -> dict[str, Any]:
        return {**super().config(), "k": self.k, "tied": False}

    def _encode_scaled(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self._pre(xs)
        vals, idx = torch.relu(y).topk(self.k, dim=-1)
        return torch.zeros_like(y).scatter(-1, idx, vals), y


class L1SAE(_Untied):
    """Baseline: untied ReLU SAE trained with loss + λ·Σ_m z_m‖d_m‖ (decoder norms not constrained)."""

    kind = "l1"

    @classmethod
    def _from_config(cls, cfg: dict) -> L1SAE:
        return cls(cfg["d"], cfg["n_neurons"], cfg.get("learn_pre_bias", True))

    def config(self) -> dict[str, Any]:
        return {**super().config(), "tied": False}

    def _encode_scaled(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self._pre(xs)
        return torch.relu(y), y
