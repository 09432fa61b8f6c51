"""Training an SAE with GBA / BA (no sparsity penalty) or a baseline (TopK, L1): one explicit loop.

x_s = x · input_scale                              (mean ‖x‖ = 1 on the first 8192 rows)
L   = mean_batch ½‖x̂_s − x_s‖²   (loss="normalized": divided by ‖x_s‖²)   [+ λ Σ_m z_m‖d_m‖ for L1]
Adam on W and a (tied) — never on b; after each step rows of W are projected to unit norm;
every T steps: bias adaptation of b from the streamed pre-activation statistics.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .bias_adaptation import GroupBiasAdaptation, quantile_bias_init
from .config import LOSSES, METHODS, GBAConfig
from .convergence import ConvergenceMonitor
from .errors import GBAError
from .sae import _SAE, L1SAE, TiedSAE, TopKSAE
from .seeding import derive_seed, generator
from .statistical_model import SparseFeatureModel

STATS_ROWS = 8192
ADAPTATION_KEYS = ("n_groups", "htf", "ltf", "gamma_minus", "gamma_plus", "every", "eps", "spacing")


@dataclass
class TrainedSAE:
    """The result of `train_sae`: ``sae`` (the module), ``history`` (loss, L0, dead fraction per log step),
    ``seconds``, the ``method``, for GBA/BA the ``adaptation`` object (targets, groups), and the ``optimizer``."""

    sae: _SAE
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    method: str = "gba"
    adaptation: GroupBiasAdaptation | None = None
    config: dict[str, Any] = field(default_factory=dict)
    optimizer: torch.optim.Optimizer | None = None
    steps_done: int = 0
    convergence: ConvergenceMonitor | None = None

    @property
    def converged(self) -> bool | None:
        """GBA/BA: whether every group's window firing stayed within the tolerance of its target for
        ``patience`` consecutive bias updates (None for TopK / L1)."""
        return None if self.convergence is None else self.convergence.converged

    def save(self, directory: str | Path) -> Path:
        """The SAE (`sae.safetensors`, `sae_config.json`) and the state to resume from (`training_state.*`)."""
        from .state import save_training_state

        self.sae.save(directory)
        return save_training_state(self, directory)


def _check_batch(x: Any, d: int | None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise GBAError(f"data batches must be tensors, got {type(x).__name__}")
    if x.ndim != 2:
        raise GBAError(f"data must be [N, d] rows of activations, got shape {tuple(x.shape)}")
    if d is not None and x.shape[1] != d:
        raise GBAError(f"data has d={x.shape[1]} but the SAE has d={d}")
    if not bool(torch.isfinite(x).all()):
        raise GBAError("data contains NaN or infinite activations")
    return x.float()


def _stream(data: Any, batch_size: int, seed: int) -> tuple[torch.Tensor, Iterator[torch.Tensor], int]:
    """(first rows for the statistics, an iterator of batches, d) for any supported kind of data."""
    if isinstance(data, SparseFeatureModel):
        g = generator(int(data.seed), f"train-stream-{int(seed)}")
        stats = data.sample(STATS_ROWS, g)[0]

        def gen() -> Iterator[torch.Tensor]:
            while True:
                yield data.sample(batch_size, g)[0]

        return stats, gen(), data.d
    if hasattr(data, "batches") and hasattr(data, "head"):  # an ActivationStore on disk
        return _check_batch(data.head(STATS_ROWS), None), data.batches(batch_size, seed), data.d
    if isinstance(data, torch.Tensor):
        x = _check_batch(data, None)
        if x.shape[0] < 1:
            raise GBAError("data has no rows")
        g = generator(int(seed), "minibatch-order")

        def gen_t() -> Iterator[torch.Tensor]:
            while True:  # one gather per pass: x[perm][i:j] == x[perm[i:j]], the same batches
                shuffled = x[torch.randperm(x.shape[0], generator=g)]
                for i in range(0, x.shape[0], batch_size):
                    yield shuffled[i : i + batch_size]

        return x[:STATS_ROWS], gen_t(), x.shape[1]
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        it = iter(data)
        first: list[torch.Tensor] = []
        rows = 0
        for batch in it:
            batch = _check_batch(batch, first[0].shape[1] if first else None)
            first.append(batch)
            rows += batch.shape[0]
            if rows >= STATS_ROWS:
                break
        if not first:
            raise GBAError("the data iterable yielded no batches")
        d = first[0].shape[1]

        def gen_i() -> Iterator[torch.Tensor]:
            for b in itertools.chain(first, it):
                yield _check_batch(b, d)

        return torch.cat(first)[:STATS_ROWS], gen_i(), d
    raise GBAError(
        f"data must be a SparseFeatureModel, an [N, d] tensor or an iterable of batches, "
        f"got {type(data).__name__}"
    )


def train_sae(
    data: Any,
    *,
    method: str = "gba",
    n_neurons: int,
    steps: int,
    batch_size: int = 512,
    lr: float = 1e-3,
    k: int | None = None,
    l1: float | None = None,
    seed: int = 0,
    activation: str = "relu",
    loss: str = "mse",
    unit_norm: bool = True,
    learn_pre_bias: bool = False,
    bias_init: str = "zero",
    pre_bias: str = "mean",
    log_every: int = 100,
    device: str = "cpu",
    progress: bool | Callable = False,
    gba_config: GBAConfig | None = None,
    callback: Callable[[int, _SAE], None] | None = None,
    resume: str | Path | None = None,
    stop_on_convergence: bool = False,
    tolerance: float = 1.25,
    patience: int = 5,
    **adaptation: Any,
) -> TrainedSAE:
    """Train an SAE on ``data`` (a `SparseFeatureModel`, an [N, d] tensor or an iterable of [B, d] batches).

    ``method``: "gba" (Group Bias Adaptation, keyword ``adaptation`` = n_groups, htf, ltf, gamma_minus,
    gamma_plus, every, eps, spacing), "ba" (K = 1, target ``htf`` — also accepted as ``p``), "topk"
    (needs ``k``) or "l1" (needs ``l1`` = λ). Raises `GBAError` for bad input and
    `iclr26_core.errors.TrainingDiverged` for a NaN loss.
    ``gba_config`` (a `GBAConfig`) supplies the adaptation settings at
    once; explicit keywords override its fields. ``callback(step, sae)`` is called after every step (after
    the bias update), e.g. to score the dictionary along the way. ``resume`` is a directory written by
    `TrainedSAE.save`: the SAE, its biases, groups, targets and Adam's moments are loaded and ``steps`` more
    steps are run (``method``, ``n_neurons`` and the adaptation settings must match the saved run).
    ``pre_bias``: b_pre starts at the data mean ("mean") or at 0 ("zero"); ``learn_pre_bias`` applies to
    every method (default False: b_pre stays where it started).
    GBA/BA runs carry a `ConvergenceMonitor` (``result.convergence``, ``result.converged``): after each bias
    update it checks every group's median window firing ÷ TAF against [1/``tolerance``, ``tolerance``];
    with ``stop_on_convergence`` training stops once that held for ``patience`` consecutive updates
    (``steps`` is then a maximum).
    """
    from iclr26_core.errors import TrainingDiverged

    if method not in METHODS:
        raise GBAError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if loss not in LOSSES:
        raise GBAError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")
    if bias_init not in ("zero", "quantile"):
        raise GBAError(f"unknown bias_init {bias_init!r}; choose zero or quantile")
    if int(steps) < 1 or int(batch_size) < 1 or int(n_neurons) < 1:
        raise GBAError(
            f"steps, batch_size and n_neurons must be >= 1 (got {steps}, {batch_size}, {n_neurons})"
        )
    if not lr > 0:
        raise GBAError(f"lr must be > 0, got {lr}")
    if not tolerance > 1 or int(patience) < 1:
        raise GBAError(f"tolerance must be > 1 and patience >= 1 (got {tolerance}, {patience})")
    if gba_config is not None:
        adaptation = {**gba_config.to_dict(), **adaptation}
    if "p" in adaptation:
        if method != "ba":
            raise GBAError("p= (the BA target frequency) only applies to method='ba'")
        adaptation["htf"] = adaptation.pop("p")
    unknown = set(adaptation) - set(ADAPTATION_KEYS)
    if unknown:
        raise GBAError(f"unknown option(s) {', '.join(sorted(unknown))} for train_sae")
    if method in ("topk", "l1") and adaptation:
        raise GBAError(f"{', '.join(sorted(adaptation))} only apply to method='gba' or 'ba'")
    if method == "topk" and k is None:
        raise GBAError("method='topk' needs k (the number of active neurons per row)")
    if method == "l1" and (l1 is None or not l1 >= 0):
        raise GBAError("method='l1' needs l1 >= 0 (the sparsity coefficient λ)")
    if method == "ba":
        if adaptation.get("n_groups", 1) != 1:
            raise GBAError(
                "method='ba' is single-group bias adaptation: n_groups must be 1 (use method='gba')"
            )
        adaptation["n_groups"] = 1
    batch_size, steps = int(batch_size), int(steps)
    saved = None
    if resume is not None:
        from .state import load_training_state

        saved = load_training_state(resume)
        if saved[0].get("method") != method:
            raise GBAError(
                f"the run at {str(resume)!r} used method={saved[0].get('method')!r}, not {method!r}"
            )
    start = 0 if saved is None else int(saved[0].get("steps_done", 0))
    stream_seed = seed if start == 0 else derive_seed(seed, f"resume-{start}")
    stats, batches, d = _stream(data, batch_size, stream_seed)

    gba = None
    if method in ("gba", "ba"):
        if saved is not None:
            adaptation = {**saved[0].get("adaptation", {}), **adaptation}
        gba = GroupBiasAdaptation(int(n_neurons), seed=seed, **adaptation)  # validates first
    if saved is not None:
        sae = _load_for_resume(resume, d, int(n_neurons))
        if gba is not None:
            from .state import restore_adaptation

            restore_adaptation(gba, *saved)
    else:
        if gba is not None:
            sae: _SAE = TiedSAE(d, n_neurons, activation, learn_pre_bias=learn_pre_bias, seed=seed)
        elif method == "topk":
            sae = TopKSAE(d, n_neurons, int(k), learn_pre_bias=learn_pre_bias, seed=seed)
        else:
            sae = L1SAE(d, n_neurons, learn_pre_bias=learn_pre_bias, seed=seed)
        sae.set_input_stats(stats, pre_bias)
        if gba is not None and bias_init == "quantile":
            quantile_bias_init(sae, stats, gba.targets)
    sae.meta = {
        "method": method,
        "seed": seed,
        "lr": lr,
        "batch_size": batch_size,
        "steps": start + steps,
        "loss": loss,
        "unit_norm": unit_norm,
        "bias_init": bias_init if saved is None else sae.meta.get("bias_init", bias_init),
        "pre_bias": pre_bias if saved is None else sae.meta.get("pre_bias", pre_bias),
        **({"adaptation": gba.config()} if gba is not None else {}),
        **({"l1": l1} if method == "l1" else {}),
        **({"resumed_from": str(resume), "resumed_at": start} if saved is not None else {}),
    }
    sae.to(device)
    params = [p for p in sae.parameters() if p.requires_grad]
    try:  # the fused kernel is several times faster for small SAEs on a CPU
        opt = torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.Adam(params, lr=lr)
    if saved is not None:
        from .state import restore_optimizer

        restore_optimizer(opt, sae, *saved)
        for group in opt.param_groups:
            group["lr"] = lr

    history: list[dict[str, float]] = []
    fired = torch.zeros(sae.n_neurons, dtype=torch.bool, device=device)
    l0_sum = torch.zeros((), device=device)
    loss_sum = torch.zeros((), device=device)
    n_log = 0
    it: Iterable[int] = range(start + 1, start + steps + 1)
    if progress is True:
        from iclr26_core.cli import progress as bar

        it = bar(it, total=steps, desc=f"train {method}")
    elif callable(progress):
        it = progress(it, total=steps, desc=f"train {method}")
    t0 = time.perf_counter()
    scale = sae.input_scale.to(device)
    done = start
    monitor = ConvergenceMonitor(tolerance, patience) if gba is not None else None
    for step in it:
        try:
            x = next(batches)
        except StopIteration:
            break
        xs = x.to(device) * scale
        xs_hat, z, y = sae.forward_scaled(xs)
        err = ((xs_hat - xs) ** 2).sum(-1)
        if loss == "normalized":
            err = err / (xs**2).sum(-1).clamp_min(1e-12)
        objective = 0.5 * err.mean()
        if method == "l1":
            objective = objective + float(l1) * (z * sae.W_dec.norm(dim=1)).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        objective.backward()
        opt.step()
        if unit_norm and method != "l1":
            sae.normalize_()
        with torch.no_grad():
            counts = (z > 0).sum(0)  # [M]; for the tied SAE z_m > 0 exactly when y_m > 0 (b <= 0)
            fired |= counts > 0
            l0_sum += counts.sum() / z.shape[0]
            loss_sum += objective.detach()
            n_log += 1
            if gba is not None:
                gba.observe_counts(counts, y.amax(0), y.shape[0])
                if gba.ready:
                    gba.update(sae)
                    monitor.observe(step, gba.last_window, gba.groups, gba.taf)
        done = step
        if callback is not None:
            callback(step, sae)
        stopping = stop_on_convergence and monitor is not None and monitor.converged
        if step % log_every == 0 or step == start + steps or stopping:
            mean_loss = float(loss_sum) / n_log
            if not math.isfinite(mean_loss):
                raise TrainingDiverged(f"the SAE loss became {mean_loss} by step {step} (try a lower lr)")
            history.append(
                {
                    "step": step,
                    "loss": mean_loss,
                    "l0": float(l0_sum) / n_log,
                    "dead_fraction": 1.0 - float(fired.float().mean()),
                }
            )
            fired.zero_()
            l0_sum.zero_()
            loss_sum.zero_()
            n_log = 0
        if stopping:
            break
    sae.eval()
    sae.meta["steps"] = done
    return TrainedSAE(
        sae=sae,
        history=history,
        seconds=time.perf_counter() - t0,
        method=method,
        adaptation=gba,
        config=dict(sae.meta),
        optimizer=opt,
        steps_done=done,
        convergence=monitor,
    )


def _load_for_resume(directory: str | Path, d: int, n_neurons: int) -> _SAE:
    sae = _SAE.load(directory)
    if sae.d != d or sae.n_neurons != n_neurons:
        raise GBAError(
            f"the SAE at {str(directory)!r} has d={sae.d}, n_neurons={sae.n_neurons}; "
            f"the data has d={d} and n_neurons={n_neurons} was asked for"
        )
    return sae
