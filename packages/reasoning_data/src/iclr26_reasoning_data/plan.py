"""Stage plans: data mixtures with token budgets, the stages that train on them, and token-controlled moves.

An *arm* of a data-allocation study is a `Plan`: a sequence of `Stage`s applied to one initialisation. Each
stage trains on a `Mixture` (sources with weights, a token budget, a packing mode per source) with its own loss
("all" tokens, or "answer_only": prompt positions labelled -100) and optimiser settings. The paper's
token-controlled comparison is `Plan.move_tokens`: move a source's tokens from one stage to another, keeping the
source stage's total constant (the other sources refill it pro rata) while the destination grows.

A source named ``replay:<stage>`` in a mixture stands for the mix of an earlier stage (its sources at its
weights), e.g. 70 % replay of pretraining plus 30 % new data in a mid-training stage.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

PACKINGS = ("concat", "example")
LOSSES = ("all", "answer_only")
REPLAY = "replay:"


def _split(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Integer token counts proportional to ``weights`` summing exactly to ``total`` (largest remainder)."""
    s = sum(weights.values())
    exact = {k: total * w / s for k, w in weights.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    rest = total - sum(out.values())
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], list(weights).index(k)))[:rest]:
        out[k] += 1
    return out


@dataclass(frozen=True)
class Mixture:
    """Sources with sampling weights, a token budget and a packing mode.

    ``packing``: "concat" joins documents with EOS and cuts ``context``-token blocks (pretraining); "example" keeps
    one example per row, padded (SFT). A dict gives each source its own mode (both in one stage). ``loss_weights``
    (optional, default 1) scales each source's per-token loss independently of how often it is sampled.
    """

    sources: dict[str, float]
    tokens: int
    packing: str | dict[str, str] = "concat"
    loss_weights: dict[str, float] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sources, dict) or not self.sources:
            raise UserError("a mixture needs at least one source (sources: {name: weight})")
        for name, w in self.sources.items():
            if not isinstance(w, int | float) or isinstance(w, bool) or not math.isfinite(w) or w <= 0:
                raise UserError(f"mixture weight of source {name!r} must be a number > 0, got {w!r}")
        if not isinstance(self.tokens, int) or isinstance(self.tokens, bool) or self.tokens < 0:
            raise UserError(f"mixture tokens must be an int >= 0, got {self.tokens!r}")
        modes = self.packing.values() if isinstance(self.packing, dict) else [self.packing]
        for mode in modes:
            if mode not in PACKINGS:
                raise UserError(f"unknown packing {mode!r}; choose one of {', '.join(PACKINGS)}")
        if isinstance(self.packing, dict):
            extra = set(self.packing) - set(self.sources)
            missing = set(self.sources) - set(self.packing)
            if extra or missing:
                raise UserError(
                    f"packing names sources {sorted(self.packing)}, the mixture has {sorted(self.sources)}"
                )
        for name, w in (self.loss_weights or {}).items():
            if name not in self.sources:
                raise UserError(f"loss weight for {name!r}, which is not a source of the mixture")
            if not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
                raise UserError(f"loss weight of source {name!r} must be a number >= 0, got {w!r}")

    def source_tokens(self) -> dict[str, int]:
        """The requested tokens of each source (integers summing to ``tokens``)."""
        return _split(self.tokens, self.sources)

    def fractions(self) -> dict[str, float]:
        s = sum(self.sources.values())
        return {k: w / s for k, w in self.sources.items()}

    def packing_of(self, source: str) -> str:
        return self.packing[source] if isinstance(self.packing, dict) else self.packing

    def loss_weight(self, source: str) -> float:
        return float((self.loss_weights or {}).get(source, 1.0))


@dataclass(frozen=True)
class Stage:
    """One training stage. Steps: ``steps`` if given, else ``ceil(epochs * rows / batch_size)`` over the stage's
    materialised rows (``epochs`` default 1: one pass over the budget, i.e. tokens / (batch x context) for concat)."""

    name: str
    mixture: Mixture
    loss: str = "all"
    lr: float = 3e-3
    batch_size: int = 32
    context: int = 64
    epochs: float | None = None
    steps: int | None = None
    weight_decay: float = 0.1
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1
    grad_clip: float | None = 1.0
    seed: int = (
        0  # part of the stage's identity: data order and sampling (arms differing here share no prefix)
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UserError("a stage needs a name")
        if self.loss not in LOSSES:
            raise UserError(
                f"stage {self.name!r}: unknown loss {self.loss!r}; choose one of {', '.join(LOSSES)}"
            )
        for key in ("batch_size", "context"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise UserError(f"stage {self.name!r}: {key} must be an int >= 1, got {getattr(self, key)!r}")
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps < 0):
            raise UserError(f"stage {self.name!r}: steps must be an int >= 0, got {self.steps!r}")
        if self.epochs is not None and not self.epochs > 0:
            raise UserError(f"stage {self.name!r}: epochs must be > 0, got {self.epochs!r}")
        if not self.lr > 0:
            raise UserError(f"stage {self.name!r}: lr must be > 0, got {self.lr!r}")

    def num_steps(self, rows: int) -> int:
        if self.steps is not None:
            return self.steps
        return math.ceil((self.epochs or 1.0) * rows / self.batch_size)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stage_from_dict(d: Any, i: int) -> Stage:
    if not isinstance(d, dict):
        raise UserError(f"plan: stage {i + 1} is not a mapping")
    for key in ("name", "mixture"):
        if key not in d:
            raise UserError(f"plan: stage {i + 1} has no {key!r} field")
    m = d["mixture"]
    if not isinstance(m, dict):
        raise UserError(f"plan: stage {d['name']!r}: mixture must be a mapping")
    for key in ("sources", "tokens"):
        if key not in m:
            raise UserError(f"plan: stage {d['name']!r}: mixture has no {key!r} field")
    known = {f.name for f in fields(Mixture)}
    unknown = set(m) - known
    if unknown:
        raise UserError(f"plan: stage {d['name']!r}: unknown mixture field(s) {sorted(unknown)}")
    known_stage = {f.name for f in fields(Stage)}
    unknown = set(d) - known_stage
    if unknown:
        raise UserError(f"plan: stage {d['name']!r}: unknown field(s) {sorted(unknown)}")
    try:
        return Stage(**{**d, "mixture": Mixture(**m)})
    except TypeError as exc:
        raise UserError(f"plan: stage {d['name']!r}: {exc}") from None


@dataclass(frozen=True)
class Plan:
    """A sequence of stages (one arm). ``sources`` / ``eval`` optionally say where the CLI finds each source
    (a JSONL or text file, ``pydoc``, or ``synthetic:<spec>``) and what it evaluates after each stage."""

    stages: tuple[Stage, ...]
    sources: dict[str, str] = field(default_factory=dict)
    eval: dict[str, Any] = field(default_factory=dict)
    base: str | None = field(default=None, compare=False, repr=False)  # relative file sources resolve here

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        if not self.stages:
            raise UserError("a plan needs at least one stage")
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise UserError(f"stage names must be unique, got {names}")
        for i, stage in enumerate(self.stages):
            for src in stage.mixture.sources:
                if src.startswith(REPLAY) and src[len(REPLAY) :] not in names[:i]:
                    raise UserError(
                        f"stage {stage.name!r}: {src!r} names no earlier stage (earlier: {names[:i]})"
                    )

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise UserError(f"no stage {name!r} in the plan; stages: {', '.join(s.name for s in self.stages)}")

    def replace_stage(self, name: str, **changes: Any) -> Plan:
        self.stage(name)
        return replace(
            self, stages=tuple(replace(s, **changes) if s.name == name else s for s in self.stages)
        )

    def move_tokens(self, source: str, tokens: int, src: str, dst: str) -> Plan:
        """Move ``tokens`` of ``source`` from stage ``src`` to stage ``dst``.

        ``src`` keeps its total: its other sources are scaled up pro rata to refill what ``source`` gave away;
        ``dst`` grows by exactly ``tokens`` (its other sources keep their token counts). Refuses to move more
        tokens than ``src`` holds of ``source``, a negative amount, or out of a stage with nothing to refill it.
        """
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise UserError(f"tokens to move must be an int >= 0, got {tokens!r}")
        if src == dst:
            raise UserError("move_tokens: source and destination stage are the same")
        s, d = self.stage(src), self.stage(dst)
        have = s.mixture.source_tokens()
        if source not in have:
            raise UserError(f"stage {src!r} has no source {source!r}; its sources: {', '.join(have)}")
        if tokens > have[source]:
            raise UserError(
                f"cannot move {tokens} tokens of {source!r}: stage {src!r} holds only {have[source]}"
            )
        others = {k: v for k, v in have.items() if k != source}
        other_total = sum(others.values())
        if tokens and not other_total:
            raise UserError(f"cannot move {source!r} out of {src!r}: no other source refills the stage")
        total = s.mixture.tokens
        if other_total:
            scale = (other_total + tokens) / other_total
            new_src = {k: v * scale for k, v in others.items()}
        else:
            new_src = {}
        if have[source] - tokens > 0:
            new_src[source] = float(have[source] - tokens)
        new_src = {k: new_src[k] for k in have if k in new_src}  # keep the original order
        dst_have = {k: float(v) for k, v in d.mixture.source_tokens().items()}
        dst_have[source] = dst_have.get(source, 0.0) + tokens
        dst_have = {k: v for k, v in dst_have.items() if v > 0} or {source: 1.0}
        s_mix = _mixture_like(s.mixture, new_src, total)
        d_mix = _mixture_like(d.mixture, dst_have, d.mixture.tokens + tokens, from_mix=s.mixture)
        return replace(
            self,
            stages=tuple(
                replace(st, mixture=s_mix)
                if st.name == src
                else replace(st, mixture=d_mix)
                if st.name == dst
                else st
                for st in self.stages
            ),
        )

    # ------------------------------------------------------------------------------------------ (de)serialise
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stages": [s.to_dict() for s in self.stages]}
        if self.sources:
            out["sources"] = dict(self.sources)
        if self.eval:
            out["eval"] = dict(self.eval)
        return out

    @classmethod
    def from_dict(cls, d: Any) -> Plan:
        if not isinstance(d, dict) or "stages" not in d:
            raise UserError("plan: no 'stages' field (a list of stages)")
        if not isinstance(d["stages"], list):
            raise UserError("plan: 'stages' must be a list")
        unknown = set(d) - {"stages", "sources", "eval"}
        if unknown:
            raise UserError(f"plan: unknown top-level field(s) {sorted(unknown)}")
        stages = [_stage_from_dict(s, i) for i, s in enumerate(d["stages"])]
        return cls(stages, dict(d.get("sources") or {}), dict(d.get("eval") or {}))

    def to_yaml(self, path: str | Path | None = None) -> str:
        """The plan as YAML (written atomically to ``path`` when given)."""
        import yaml

        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            from iclr26_core.fs import atomic_write_text

            atomic_write_text(path, text)
        return text

    @classmethod
    def from_yaml(cls, path: str | Path) -> Plan:
        import yaml

        path = Path(path)
        if not path.is_file():
            raise UserError(f"no plan file at {str(path)!r}")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise UserError(f"plan {str(path)!r} is not valid YAML ({str(exc).splitlines()[0]})") from None
        return replace(cls.from_dict(data), base=str(path.resolve().parent))

    def rebased(self, folder: str | Path) -> Plan:
        """The plan with its relative file sources rewritten relative to ``folder`` (where it will be saved)."""
        import os

        if self.base is None:
            return self
        moved = {}
        for name, spec in self.sources.items():
            if _is_relative_file(spec):
                spec = os.path.relpath(Path(self.base) / spec, Path(folder).resolve())
            moved[name] = spec
        return replace(self, sources=moved, base=str(Path(folder).resolve()))

    def fingerprint(self, upto: int) -> str:
        """A key for the first ``upto`` stages: arms with equal keys (and seed) train identical prefixes."""
        return json.dumps([_stage_key(s) for s in self.stages[:upto]], sort_keys=True)


def _is_relative_file(spec: str) -> bool:
    return spec != "pydoc" and ":" not in spec.split("/")[0] and not Path(spec).expanduser().is_absolute()


def _mixture_like(
    mix: Mixture, token_weights: dict[str, float], tokens: int, from_mix: Mixture | None = None
) -> Mixture:
    packing = mix.packing
    if isinstance(packing, dict):
        packing = {
            k: packing.get(k) or (from_mix.packing_of(k) if from_mix else "concat") for k in token_weights
        }
    lw = mix.loss_weights
    if lw is not None:
        lw = {k: v for k, v in lw.items() if k in token_weights}
    s = sum(token_weights.values())
    weights = {k: v / s for k, v in token_weights.items()}
    return Mixture(weights, tokens, packing, lw or None)


def _stage_key(s: Stage) -> dict[str, Any]:
    d = s.to_dict()
    fr = s.mixture.fractions()
    d["mixture"] = {**d["mixture"], "sources": {k: round(v, 9) for k, v in sorted(fr.items())}}
    return d
