"""Run a plan (one arm) on any transformers causal LM, and a grid of arms with shared-prefix reuse.

Every stage trains with the core's accelerate loop (`iclr26_core.train.train_lm`) on the rows `build_stage_data`
materialises, with `masked_lm_loss`. After each stage the runner records the achieved tokens per source, the
losses, the evaluation (``eval_fn(model, stage_name)``), the weights (in memory) and, with ``checkpoint_dir``, a
safetensors checkpoint per stage (`iclr26_core.checkpoints`) plus ``tokens.json``.

`run_grid` runs many arms; arms whose first k stages are identical (same stages, same seed) train that prefix
once and continue from its weights (``shared_prefix=True``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

from .plan import Plan, Stage


@dataclass
class StageResult:
    name: str
    steps: int
    rows: int
    losses: list[float]
    tokens: dict[str, dict[str, int]]
    eval: dict[str, Any] | None = None
    checkpoint: str | None = None
    seconds: float = 0.0
    state: dict[str, Any] | None = field(default=None, repr=False)  # the weights after the stage (CPU)
    reused: bool = False  # taken from an earlier arm with the same prefix (run_grid)

    def summary(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "rows": self.rows,
            "first_loss": self.losses[0] if self.losses else None,
            "final_loss": sum(self.losses[-10:]) / len(self.losses[-10:]) if self.losses else None,
            "tokens": self.tokens,
            "eval": self.eval,
            "checkpoint": self.checkpoint,
            "seconds": round(self.seconds, 2),
            "reused": self.reused,
        }


@dataclass
class PlanResult:
    """Per-stage results of one arm; ``model`` holds the final weights."""

    stages: list[StageResult]
    model: Any = field(default=None, repr=False)

    def stage(self, name: str) -> StageResult:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def tokens(self) -> dict[str, dict[str, dict[str, int]]]:
        return {s.name: s.tokens for s in self.stages}

    @property
    def evals(self) -> dict[str, Any]:
        return {s.name: s.eval for s in self.stages}

    def to_dict(self) -> dict[str, Any]:
        return {s.name: s.summary() for s in self.stages}


def _is_causal_lm(model: Any) -> bool:
    try:
        from transformers import GenerationMixin, PreTrainedModel
    except ImportError:  # pragma: no cover
        return False
    return (
        isinstance(model, PreTrainedModel)
        and isinstance(model, GenerationMixin)
        and hasattr(model, "get_output_embeddings")
        and model.get_output_embeddings() is not None
    )


def check_causal_lm(model: Any) -> None:
    """`UserError` unless ``model`` is a transformers model with a causal-LM head."""
    if not _is_causal_lm(model):
        raise UserError(
            f"{type(model).__name__} is not a causal language model with an LM head "
            "(load it with AutoModelForCausalLM)"
        )


def stage_seed(seed: int, stage: Stage) -> int:
    return int(hashlib.sha256(f"{seed}:{stage.seed}:{stage.name}".encode()).hexdigest()[:8], 16)


def run_stage(
    model: Any,
    plan: Plan,
    index: int,
    sources: Mapping[str, Any],
    tokenizer: Any,
    *,
    seed: int = 0,
    eval_fn: Callable[[Any, str], Any] | None = None,
    device: str = "cpu",
    progress: bool = True,
    position: int | None = None,
    desc: str | None = None,
    encoded: dict | None = None,
    on_step: Callable[[int, float], None] | None = None,
    keep_state: bool = True,
) -> StageResult:
    """Train ``model`` in place on stage ``index`` of ``plan``; returns its `StageResult`."""
    import torch

    from iclr26_core.train import TrainConfig, batch_indices, train_lm

    from .data import build_stage_data, masked_lm_loss

    stage = plan.stages[index]
    t0 = time.perf_counter()
    data = build_stage_data(stage, sources, tokenizer, seed, plan, encoded)
    steps = stage.num_steps(len(data))
    if len(data) == 0 and steps:
        raise UserError(f"stage {stage.name!r} has no rows (token budget {stage.mixture.tokens})")
    s_seed = stage_seed(seed, stage)
    cfg = TrainConfig.from_section(
        stage,
        steps=steps,
        seed=s_seed,
        device=device,
        progress=progress,
        desc=desc or stage.name,
        position=position,
    )
    n = len(data)

    def batches(step: int):
        return data.batch(batch_indices(n, stage.batch_size, step, s_seed))

    losses: list[float] = []
    if steps:
        res = train_lm(model, None, cfg=cfg, loss_fn=masked_lm_loss, batches=batches, on_step=on_step)
        losses = res.losses
    model.eval()
    ev = None
    if eval_fn is not None:
        with torch.no_grad():
            ev = eval_fn(model, stage.name)
    state = (
        {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()} if keep_state else None
    )
    return StageResult(stage.name, steps, n, losses, data.tokens, ev, None, time.perf_counter() - t0, state)


def _save_stage(directory: Path, model: Any, stage: Stage, result: StageResult) -> str:
    from iclr26_core.checkpoints import save

    path = directory / stage.name
    save(
        path,
        model,
        config=stage.to_dict(),
        metrics={k: v for k, v in result.summary().items() if k != "checkpoint"},
    )
    return str(path)


def _write_tokens(directory: Path, results: list[StageResult]) -> None:
    from iclr26_core.fs import write_json

    write_json(directory / "tokens.json", {s.name: s.tokens for s in results})


def run_plan(
    model: Any,
    plan: Plan,
    sources: Mapping[str, Any],
    tokenizer: Any,
    *,
    seed: int = 0,
    eval_fn: Callable[[Any, str], Any] | None = None,
    checkpoint_dir: str | Path | None = None,
    device: str = "cpu",
    progress: bool = True,
    keep_states: bool = True,
) -> PlanResult:
    """Train ``model`` through every stage of ``plan``.

    ``sources``: {name: texts, `Example`s, dicts or a ``datasets.Dataset``}; ``eval_fn(model, stage_name)`` runs
    after each stage; ``checkpoint_dir`` receives ``<stage>/`` checkpoints and ``tokens.json``.
    """
    check_causal_lm(model)
    directory = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if directory is not None:
        from iclr26_core.fs import check_out_dir

        check_out_dir(directory).mkdir(parents=True, exist_ok=True)
    encoded: dict = {}
    results: list[StageResult] = []
    common = {"seed": seed, "eval_fn": eval_fn, "device": device, "progress": progress, "encoded": encoded}
    for i, stage in enumerate(plan.stages):
        r = run_stage(model, plan, i, sources, tokenizer, keep_state=keep_states, **common)
        if directory is not None:
            r.checkpoint = _save_stage(directory, model, stage, r)
        results.append(r)
    if directory is not None:
        _write_tokens(directory, results)
    return PlanResult(results, model)


@dataclass
class GridResult:
    """``runs[(arm, seed)]`` is that arm's `PlanResult` (without a model); ``trained`` / ``reused`` count stages."""

    runs: dict[tuple[str, int], PlanResult]
    trained: int = 0
    reused: int = 0

    def eval(self, arm: str, stage: str, seed: int) -> Any:
        return self.runs[(arm, seed)].stage(stage).eval


def run_grid(
    arms: Mapping[str, Plan],
    model_fn: Callable[[int], Any],
    sources: Mapping[str, Any],
    tokenizer: Any,
    *,
    seeds: tuple[int, ...] | list[int] = (0,),
    eval_fn: Callable[[Any, str], Any] | None = None,
    shared_prefix: bool = True,
    device: str = "cpu",
    progress: bool = True,
    position: int | None = None,
    on_step: Callable[[int, float], None] | None = None,
    on_stage: Callable[[str, int, StageResult], None] | None = None,
) -> GridResult:
    """Run every arm for every seed (``model_fn(seed)`` gives the initial model; ``seed`` also drives the data
    order). With ``shared_prefix``, a stage prefix trained once is reused by every later arm that shares it."""
    cache: dict[tuple[int, str], tuple[dict, list[StageResult]]] = {}
    out = GridResult({})
    encoded: dict = {}
    for seed in seeds:
        for name, plan in arms.items():
            model = model_fn(seed)
            check_causal_lm(model)
            k, results = 0, []
            if shared_prefix:
                for j in range(len(plan.stages), 0, -1):
                    hit = cache.get((seed, plan.fingerprint(j)))
                    if hit is not None:
                        model.load_state_dict(hit[0])
                        k, results = j, [_reused(r) for r in hit[1]]
                        out.reused += j
                        break
            common = {"seed": seed, "eval_fn": eval_fn, "device": device, "progress": progress}
            common |= {"position": position, "encoded": encoded, "on_step": on_step}
            for i in range(k, len(plan.stages)):
                desc = f"{name}: {plan.stages[i].name}"
                r = run_stage(
                    model, plan, i, sources, tokenizer, desc=desc, keep_state=shared_prefix, **common
                )
                results.append(r)
                out.trained += 1
                if shared_prefix:
                    cache[(seed, plan.fingerprint(i + 1))] = (r.state, list(results))
                if on_stage is not None:
                    on_stage(name, seed, r)
            out.runs[(name, seed)] = PlanResult([_light(r) for r in results])
    return out


def _reused(r: StageResult) -> StageResult:
    return StageResult(
        r.name, r.steps, r.rows, r.losses, r.tokens, r.eval, r.checkpoint, r.seconds, r.state, True
    )


def _light(r: StageResult) -> StageResult:
    return StageResult(
        r.name, r.steps, r.rows, r.losses, r.tokens, r.eval, r.checkpoint, r.seconds, None, r.reused
    )
