"""Bias Adaptation (BA) and Group Bias Adaptation (GBA): steer each neuron to a target activation frequency.

No sparsity penalty and no TopK: every T optimiser steps, using the pre-activations y [B, M] seen since the
last update (streamed statistics, no buffer),

    p_m = fraction of rows with y_m > 0             r_m = max(0, max over rows of y_m)
    p_m > p_target(m):  b_m ← max(b_m − γ₋·r_m, −1)       (fires too often → more selective)
    p_m < ε:            b_m ← min(b_m + γ₊·r̄_g, 0)        (dead → raised; r̄_g = mean r over the firing
                                                            neurons of its group, else over all firing
                                                            neurons, else 1 — the last fallback is inferred)
    otherwise:          b_m unchanged

so b stays in [−1, 0] (the paper's Algorithm 1 as printed swapped min and max; a reviewer noted it).
GBA splits the M neurons at random into K near-equal groups; group k targets the frequency
p_k = HTF·(LTF/HTF)^((k−1)/(K−1)) (geometric grid). BA is the case K = 1 with target p = HTF.
"""

from __future__ import annotations

import torch

from .config import validate_adaptation
from .errors import GBAError
from .seeding import generator


def taf_grid(n_groups: int, htf: float, ltf: float, spacing: str = "geometric") -> torch.Tensor:
    """The K target activation frequencies [K], from HTF down to LTF (K = 1 → [HTF])."""
    validate_adaptation(n_groups, htf, ltf, 1, spacing)
    k = int(n_groups)
    if k == 1:
        return torch.tensor([float(htf)], dtype=torch.float64)
    t = torch.arange(k, dtype=torch.float64) / (k - 1)
    if spacing == "geometric":
        return float(htf) * (float(ltf) / float(htf)) ** t
    return float(htf) + (float(ltf) - float(htf)) * t


def ba_update(
    bias: torch.Tensor,
    fire_frac: torch.Tensor,
    max_pre: torch.Tensor,
    targets: torch.Tensor,
    groups: torch.Tensor,
    gamma_minus: float = 0.01,
    gamma_plus: float = 0.01,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One bias-adaptation step (the functional form). All inputs are [M]; returns (new_b, lowered, raised).

    ``max_pre`` is r_m = max(0, max_rows y_m); ``groups`` [M] holds group ids, ``targets`` [M] each neuron's TAF.
    """
    r = max_pre.clamp_min(0).to(bias.dtype)
    p = fire_frac.to(torch.float64)
    lowered = p > targets.to(torch.float64)
    dead = (p < eps) & ~lowered
    firing = p >= eps
    n_groups = int(groups.max()) + 1 if groups.numel() else 0
    if bool(firing.any()):
        global_mean = float(r[firing].mean())
    else:
        global_mean = 1.0  # nothing fired at all (inferred fallback)
    sums = torch.zeros(n_groups, dtype=r.dtype).index_add_(
        0, groups, torch.where(firing, r, torch.zeros_like(r))
    )
    counts = torch.zeros(n_groups, dtype=r.dtype).index_add_(0, groups, firing.to(r.dtype))
    group_mean = torch.where(counts > 0, sums / counts.clamp_min(1), torch.full_like(sums, global_mean))
    rbar = group_mean[groups]
    new = bias.clone()
    new = torch.where(lowered, torch.clamp(bias - gamma_minus * r, min=-1.0), new)
    new = torch.where(dead, torch.clamp(bias + gamma_plus * rbar, max=0.0), new)
    return new, lowered, dead


class GroupBiasAdaptation:
    """Streams pre-activation statistics and adapts the neuron biases ``sae.b`` every ``every`` steps.

    ``n_groups=1, htf=p`` gives plain BA. Attributes: ``targets`` [M] (float64), ``groups`` [M] (long),
    ``taf`` [K]. Use: ``observe(y)`` after each optimiser step, then ``update(sae)`` when ``ready``.
    """

    def __init__(
        self,
        n_neurons: int,
        n_groups: int = 10,
        htf: float = 0.5,
        ltf: float = 1e-3,
        gamma_minus: float = 0.01,
        gamma_plus: float = 0.01,
        every: int = 50,
        eps: float = 1e-6,
        seed: int = 0,
        spacing: str = "geometric",
    ) -> None:
        validate_adaptation(n_groups, htf, ltf, every, spacing, gamma_minus, gamma_plus)
        if int(n_neurons) < int(n_groups):
            raise GBAError(f"n_neurons ({n_neurons}) must be at least n_groups ({n_groups})")
        self.n_neurons, self.n_groups = int(n_neurons), int(n_groups)
        self.htf, self.ltf, self.spacing = float(htf), float(ltf), spacing
        self.gamma_minus, self.gamma_plus = float(gamma_minus), float(gamma_plus)
        self.every, self.eps = int(every), float(eps)
        self.taf = taf_grid(n_groups, htf, ltf, spacing)
        perm = torch.randperm(self.n_neurons, generator=generator(int(seed), "groups"))
        groups = torch.empty(self.n_neurons, dtype=torch.long)
        groups[perm] = torch.arange(self.n_neurons) * self.n_groups // self.n_neurons
        self.groups = groups
        self.targets = self.taf[groups]
        self.n_updates = 0
        self.last_window: torch.Tensor | None = None  # p_m [M] of the window the last update acted on
        self.reset()

    def config(self) -> dict:
        return {
            "n_groups": self.n_groups,
            "htf": self.htf,
            "ltf": self.ltf,
            "spacing": self.spacing,
            "gamma_minus": self.gamma_minus,
            "gamma_plus": self.gamma_plus,
            "every": self.every,
            "eps": self.eps,
        }

    def reset(self) -> None:
        self._count: torch.Tensor | None = None  # [M] rows with y_m > 0, kept on the data's device
        self._max: torch.Tensor | None = None  # [M] running max of y_m
        self._rows = 0
        self._steps = 0

    @torch.no_grad()
    def observe(self, pre_acts: torch.Tensor) -> None:
        """Add a batch of pre-activations y [B, M] to the window statistics."""
        if pre_acts.ndim != 2 or pre_acts.shape[1] != self.n_neurons:
            raise GBAError(
                f"pre-activations have shape {tuple(pre_acts.shape)}, expected [B, {self.n_neurons}]"
            )
        y = pre_acts.detach()
        self.observe_counts((y > 0).sum(0), y.amax(0), y.shape[0])

    @torch.no_grad()
    def observe_counts(self, count: torch.Tensor, peak: torch.Tensor, rows: int) -> None:
        """The same as `observe` from a batch's per-neuron counts of y_m > 0 [M] and maxima of y_m [M]."""
        if self._count is None:
            self._count, self._max = count, peak
        else:
            self._count += count
            torch.maximum(self._max, peak, out=self._max)
        self._rows += int(rows)
        self._steps += 1

    @property
    def ready(self) -> bool:
        """True once ``every`` batches have been observed since the last update."""
        return self._steps >= self.every

    def window_frequencies(self) -> torch.Tensor:
        """p_m [M] over the current window."""
        if self._count is None:
            return torch.zeros(self.n_neurons, dtype=torch.float64)
        return self._count.to("cpu", torch.float64) / max(self._rows, 1)

    @torch.no_grad()
    def update(self, sae) -> dict:
        """Apply one BA step to ``sae.b`` in place, reset the window; returns counts lowered/raised."""
        if self._rows == 0:
            return {"lowered": 0, "raised": 0}
        b = sae.b
        self.last_window = self.window_frequencies()
        new, lowered, raised = ba_update(
            b.detach().cpu().to(torch.float64),
            self.last_window,
            self._max.to("cpu", torch.float64).clamp_min(0),
            self.targets,
            self.groups,
            self.gamma_minus,
            self.gamma_plus,
            self.eps,
        )
        b.copy_(new.to(b.dtype))
        self.n_updates += 1
        self.reset()
        return {"lowered": int(lowered.sum()), "raised": int(raised.sum())}


@torch.no_grad()
def quantile_bias_init(sae, x: torch.Tensor, targets: torch.Tensor) -> None:
    """Our option ``bias_init="quantile"``: b_m = −(1−p_m)-quantile of u_m on ``x`` (rescaled), clipped to [−1, 0].

    Each neuron then starts firing at (about) its target frequency p_m.
    """
    xs = (sae.check_input(x) * sae.input_scale - sae.b_pre).to(sae.W.device)
    n = xs.shape[0]
    idx = ((1.0 - targets.to(torch.float64)) * (n - 1)).round().long().clamp(0, n - 1).to(xs.device)
    for lo in range(0, sae.n_neurons, 4096):  # chunks of neurons keep [B, chunk] small for wide SAEs
        hi = min(lo + 4096, sae.n_neurons)
        u = xs @ sae.W[lo:hi].T  # [B, chunk]
        q = u.sort(dim=0).values.gather(0, idx[lo:hi].unsqueeze(0)).squeeze(0)
        sae.b[lo:hi] = (-q).clamp(-1.0, 0.0).to(sae.b.dtype)
