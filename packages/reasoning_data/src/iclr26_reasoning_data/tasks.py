"""Synthetic, verifiable multi-step reasoning data with explicit diversity, quality and scale knobs.

Eight task families (the spec's F0-F7), each with three surface templates. An example is a prompt
``"Q: <question>\\nA: "`` and an answer ``"<trace> =<final>\\n"``::

    F0 add chain mod 10      a=3;b=a+4;c=b+2;d=c+7;d?   ->  b=7;c=9;d=6 =6
    F3 running max           max 3 7 2 9 4?              ->  3 7 7 9 9 =9
    F7 successor chain       next next 47?               ->  48 49 =49

* Templates 0 and 1 are the formats of pretraining corpora (`TRAIN_TEMPLATES`); template 2 (`EVAL_TEMPLATE`,
  e.g. ``max of [3|7|2|9|4]?`` -> ``3|7|7|9|9 =9``) is the held-out format of SFT and evaluation, so that what
  pretraining contributes is transfer, not the evaluation format itself.
* Diversity: which families and templates a mix draws from (diverse: all families x 2, narrow: 2 x 1).
* Quality: the fraction ``corrupt`` of corrupted traces. "propagated" replaces one intermediate value by a
  wrong one and recomputes the later steps from it, so the error reaches the final answer; "missing_steps" drops
  one intermediate step (final answer right); "wrong_final" changes only the final answer.
* Scale: how many examples (tokens) a mix holds.

Held-out problems (one registry per study): ``holdout`` problems per family drawn from ``heldout_seed`` alone,
whatever the sampling ``seed``, plus the problems of any evaluation set passed as ``exclude``; they are excluded
from every training sample by canonical problem, so no template of a held-out problem is trained on.
`ReasoningTasks.eval_set` returns the first ``per_family`` of them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from iclr26_core.errors import UserError

N_FAMILIES = 8
N_TEMPLATES = 3
TRAIN_TEMPLATES = (0, 1)  # the formats of the pretraining reasoning corpora (P_div: both, P_hq: template 0)
EVAL_TEMPLATE = 2  # the held-out format: SFT and evaluation only, never in a pretraining corpus
FAMILY_NAMES = (
    "add chain mod 10",
    "subtract chain mod 10",
    "multiply chain mod 10",
    "running max",
    "running count of a digit",
    "running sum mod 10",
    "running min",
    "successor chain mod 100",
)
CORRUPTIONS = ("propagated", "missing_steps", "wrong_final")
PROMPT = "Q: {question}\nA: "


@dataclass(frozen=True)
class Example:
    """One problem: ``prompt + answer`` is the training text; ``final`` the answer's last value."""

    prompt: str
    answer: str
    final: str
    family: int
    template: int = 0
    corrupted: bool = False
    problem: tuple | None = None  # the canonical problem (the held-out registry matches on it)

    @property
    def text(self) -> str:
        return self.prompt + self.answer

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["problem"] = None if self.problem is None else list(self.problem)
        return {**d, "text": self.text}


# ------------------------------------------------------------------------------------------------ families
# A problem is (init, items): the trace is the scan values[j] = step(values[j-1], items[j]) with
# values[-1] = init; the final answer is values[-1].
_CHAIN_OPS: dict[int, tuple[str, Callable[[int, int], int]]] = {
    0: ("+", lambda v, x: (v + x) % 10),
    1: ("-", lambda v, x: (v - x) % 10),
    2: ("*", lambda v, x: (v * x) % 10),
}
_NAMES = ("abcd", "wxyz", "pqrs")
_CHAIN_SEP = (";", ", ", " | ")
_RUN_SEP = (" ", ",", "|")
_RUN_WORD = {3: "max", 5: "sum", 6: "min"}


def _step(family: int, problem: tuple) -> Callable[[Any, int], int]:
    if family in _CHAIN_OPS:
        return _CHAIN_OPS[family][1]
    if family == 3:
        return lambda acc, x: x if acc is None else max(acc, x)
    if family == 4:
        target = problem[0]
        return lambda acc, x: (acc or 0) + (x == target)
    if family == 5:
        return lambda acc, x: x if acc is None else (acc + x) % 10
    if family == 6:
        return lambda acc, x: x if acc is None else min(acc, x)
    return lambda acc, _x: (acc + 1) % 100  # family 7


def _init_items(family: int, problem: tuple) -> tuple[Any, tuple[int, ...]]:
    if family in _CHAIN_OPS:
        return problem[0], tuple(problem[1:])
    if family == 4:
        return None, tuple(problem[1:])
    if family == 7:
        return problem[0], (1,) * problem[1]
    return None, tuple(problem)


def _draw(family: int, rng: random.Random) -> tuple:
    if family in _CHAIN_OPS:
        return tuple(rng.randrange(10) for _ in range(4))  # start and three operands
    if family == 4:
        target = rng.randrange(10)
        return (target, *(target if rng.random() < 0.4 else rng.randrange(10) for _ in range(5)))
    if family == 7:
        return (rng.randrange(100), rng.randrange(2, 6))  # start 0-99, 2-5 successors
    return tuple(rng.randrange(10) for _ in range(5))


def _value_range(family: int) -> range:
    return range(100) if family == 7 else range(6) if family == 4 else range(10)


def solve(family: int, problem: tuple) -> list[int]:
    """The trace values of a problem (the generator's own computation; tests re-verify it independently)."""
    init, items = _init_items(family, problem)
    step, values, acc = _step(family, problem), [], init
    for x in items:
        acc = step(acc, x)
        values.append(acc)
    return values


def _recompute(family: int, problem: tuple, values: list[int], i: int, wrong: int) -> list[int]:
    """``values`` with ``values[i] = wrong`` and every later step recomputed from it."""
    _, items = _init_items(family, problem)
    step, out = _step(family, problem), list(values)
    out[i] = wrong
    for j in range(i + 1, len(out)):
        out[j] = step(out[j - 1], items[j])
    return out


def question(family: int, problem: tuple, template: int) -> str:
    """The question text of ``problem`` in surface template 0, 1 or 2 (2: the held-out format, see `EVAL_TEMPLATE`)."""
    if family in _CHAIN_OPS:
        op, names, sep = _CHAIN_OPS[family][0], _NAMES[template], _CHAIN_SEP[template]
        parts = [f"{names[0]}={problem[0]}"]
        parts += [f"{names[j + 1]}={names[j]}{op}{x}" for j, x in enumerate(problem[1:])]
        end = {0: ";", 1: ". ", 2: " | "}[template]
        return sep.join(parts) + f"{end}{names[3]}?"
    if family == 7:
        start, k = problem
        if template == 0:
            return " ".join(["next"] * k) + f" {start}?"
        if template == 1:
            return "succ(" * k + str(start) + ")" * k + "?"
        return f"{start}" + " +1" * k + "?"
    items = problem[1:] if family == 4 else problem
    word = f"count {problem[0]}" if family == 4 else _RUN_WORD[family]
    if template == 0:
        return f"{word}{' in' if family == 4 else ''} {' '.join(map(str, items))}?"
    if template == 1:
        return f"{word.replace(' ', '(')}{'; ' if family == 4 else '('}{','.join(map(str, items))})?"
    return f"{word} of [{'|'.join(map(str, items))}]?"


def trace(family: int, values: Sequence[int | None], template: int) -> str:
    """The rendered steps; ``None`` entries (a dropped step) are left out."""
    if family in _CHAIN_OPS:
        names, sep = _NAMES[template], _CHAIN_SEP[template]
        return sep.join(f"{names[j + 1]}={v}" for j, v in enumerate(values) if v is not None)
    return _RUN_SEP[template].join(str(v) for v in values if v is not None)


def make_example(
    family: int,
    problem: tuple,
    template: int,
    corruption: str | None = None,
    rng: random.Random | None = None,
) -> Example:
    """The example of ``problem``; with ``corruption``, a corrupted trace (``rng`` picks the error)."""
    values: list[int | None] = list(solve(family, problem))
    final = values[-1]
    if corruption is not None:
        rng = rng or random.Random(0)
        values, final = _corrupt(family, problem, values, corruption, rng)
    answer = f"{trace(family, values, template)} ={final}\n"
    prompt = PROMPT.format(question=question(family, problem, template))
    return Example(prompt, answer, str(final), family, template, corruption is not None, tuple(problem))


def _corrupt(family: int, problem: tuple, values: list, mode: str, rng: random.Random) -> tuple[list, int]:
    final = values[-1]
    n = len(values)
    if mode == "wrong_final":
        return values, rng.choice([v for v in _value_range(family) if v != final])
    if mode == "missing_steps":
        out = list(values)
        out[rng.randrange(n - 1)] = None  # one intermediate step dropped; the final answer stays right
        return out, final
    # propagated: one intermediate value wrong, later steps recomputed from it, the final answer changes
    positions = list(range(n - 1))
    rng.shuffle(positions)
    for i in [*positions, n - 1]:  # the final itself only when no intermediate error can reach it
        wrongs = [w for w in _value_range(family) if w != values[i]]
        rng.shuffle(wrongs)
        for w in wrongs:
            out = _recompute(family, problem, values, i, w)
            if out[-1] != final:
                return out, out[-1]
    raise AssertionError("unreachable: a wrong final value always changes the final")  # pragma: no cover


# ---------------------------------------------------------------------------------------------- the sampler
def parse_families(spec: str | int | Iterable[int]) -> list[int]:
    """``"0-7"``, ``"0,3"``, ``5`` or a list -> sorted family ids; `UserError` for an unknown family."""
    if isinstance(spec, int):
        ids = [spec]
    elif isinstance(spec, str):
        ids = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
            if not m:
                raise UserError(f"bad family list {spec!r}: use e.g. 0-7 or 0,3")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            ids.extend(range(lo, hi + 1))
    else:
        ids = [int(f) for f in spec]
    if not ids:
        raise UserError("no task family given (families are 0-7)")
    bad = [f for f in ids if not 0 <= f < N_FAMILIES]
    if bad:
        raise UserError(
            f"unknown task family {bad[0]}: families are 0-{N_FAMILIES - 1} ({', '.join(FAMILY_NAMES)})"
        )
    return sorted(set(ids))


def _check_templates(templates: int | Iterable[int]) -> list[int]:
    ids = list(range(templates)) if isinstance(templates, int) else sorted({int(t) for t in templates})
    if not ids or any(not 0 <= t < N_TEMPLATES for t in ids):
        raise UserError(
            f"templates must be 1, 2 or 3 (the first k) or a subset of [0, 1, 2], got {templates!r}"
        )
    return ids


def problem_key(example: Any) -> tuple[int, tuple] | None:
    """``(family, canonical problem)`` of an `Example` or a generated JSONL row; None when it has no problem."""
    get = example.get if isinstance(example, dict) else lambda k, d=None: getattr(example, k, d)
    problem, family = get("problem"), get("family")
    if problem is None or family is None:
        return None
    return int(family), tuple(int(x) for x in problem)


def check_corrupt(corrupt: float, corruption: str = "propagated") -> None:
    if not 0.0 <= float(corrupt) <= 1.0:
        raise UserError(f"corrupt must be a fraction in [0, 1], got {corrupt}")
    if corruption not in CORRUPTIONS:
        raise UserError(f"unknown corruption {corruption!r}; choose one of {', '.join(CORRUPTIONS)}")


class ReasoningTasks:
    """A generator of the eight families with a fixed held-out set (see the module docstring).

    >>> tasks = ReasoningTasks(seed=0)
    >>> train = tasks.sample(1000, families=[0, 3], templates=1, corrupt=0.3)
    >>> test = tasks.eval_set(per_family=100)          # never in any sample of this object
    """

    def __init__(
        self,
        families: Iterable[int] | str = range(N_FAMILIES),
        templates: int | Iterable[int] = TRAIN_TEMPLATES,
        seed: int = 0,
        holdout: int = 100,
        heldout_seed: int = 0,
        exclude: Iterable[Any] = (),
    ) -> None:
        self.families = parse_families(families)
        self.templates = _check_templates(templates)
        self.seed = int(seed)
        self.holdout = int(holdout)
        self.heldout_seed = int(heldout_seed)
        self._rng = random.Random(f"train:{self.seed}")
        # the held-out registry: drawn from ``heldout_seed`` only, so every source and evaluation of a study
        # (whatever its sampling seed) shares it; ``exclude`` adds the problems of another evaluation set
        self._held: dict[int, list[tuple]] = {f: self._draw_heldout(f) for f in range(N_FAMILIES)}
        self._held_keys = {f: set(v) for f, v in self._held.items()}
        for ex in exclude:
            key = problem_key(ex)
            if key is not None:
                self._held_keys[key[0]].add(key[1])

    def _draw_heldout(self, family: int) -> list[tuple]:
        rng = random.Random(f"eval:{self.heldout_seed}:{family}")
        seen: dict[tuple, None] = {}
        for _ in range(self.holdout * 50):
            if len(seen) == self.holdout:
                break
            seen.setdefault(_draw(family, rng))
        return list(seen)

    def is_heldout(self, family: int, problem: tuple) -> bool:
        return problem in self._held_keys[family]

    def sample(
        self,
        n: int,
        *,
        families: Iterable[int] | str | None = None,
        templates: int | Iterable[int] | None = None,
        corrupt: float = 0.0,
        corruption: str = "propagated",
        seed: int | None = None,
    ) -> list[Example]:
        """``n`` training examples, balanced over the families (round robin, templates alternating), shuffled;
        exactly ``round(corrupt * n)`` of them corrupted. ``seed``: an independent stream (default: this object's
        running stream)."""
        fams = self.families if families is None else parse_families(families)
        tmpls = self.templates if templates is None else _check_templates(templates)
        check_corrupt(corrupt, corruption)
        if n < 0:
            raise UserError(f"the number of examples must be >= 0, got {n}")
        rng = self._rng if seed is None else random.Random(f"sample:{self.seed}:{seed}")
        bad = set(rng.sample(range(n), round(corrupt * n))) if n else set()
        out = []
        for i in range(n):
            fam = fams[i % len(fams)]
            tmpl = tmpls[(i // len(fams)) % len(tmpls)]
            problem = _draw(fam, rng)
            while problem in self._held_keys[fam]:
                problem = _draw(fam, rng)
            out.append(make_example(fam, problem, tmpl, corruption if i in bad else None, rng))
        rng.shuffle(out)
        return out

    def eval_set(
        self,
        per_family: int = 40,
        families: Iterable[int] | str | None = None,
        templates: int | Iterable[int] | None = None,
    ) -> list[Example]:
        """The first ``per_family`` held-out problems of each family, templates alternating, clean."""
        fams = self.families if families is None else parse_families(families)
        tmpls = self.templates if templates is None else _check_templates(templates)
        if not 0 < per_family <= self.holdout:
            raise UserError(f"per_family must be in 1..{self.holdout} (the held-out pool), got {per_family}")
        out = []
        for fam in fams:
            held = self._held[fam]
            if len(held) < per_family:
                raise UserError(f"family {fam} has only {len(held)} distinct held-out problems")
            for i, problem in enumerate(held[:per_family]):
                out.append(make_example(fam, problem, tmpls[i % len(tmpls)]))
        return out

    @staticmethod
    def to_dataset(examples: Sequence[Example]):
        """The examples as a ``datasets.Dataset`` (prompt, answer, final, family, template, corrupted, text)."""
        import datasets

        rows = [e.to_dict() for e in examples]
        cols = ["prompt", "answer", "final", "family", "template", "corrupted", "text"]
        return datasets.Dataset.from_dict({c: [r[c] for r in rows] for c in cols})


ALPHABET = "".join(chr(c) for c in range(32, 127)) + "\n"  # printable ASCII and newline: pydoc and the tasks


def char_tokenizer():
    """The character tokenizer of the miniature (`iclr26_core.tokenizers.char_tokenizer` over printable ASCII
    plus newline: 3 special tokens + 96 characters; the rare non-ASCII pydoc characters map to ``<unk>``)."""
    from iclr26_core.tokenizers import char_tokenizer as core_char_tokenizer

    return core_char_tokenizer(ALPHABET)
