"""Estimate a game's (p, t, c) from two real solvers on a task set, then solve it.

A solver is any callable ``solver(task) -> int`` (the chosen option). For each solver: p = accuracy,
t = mean wall time per query × ``time_value``, c = the given cost per call, else FLOPs per call / ``flops_unit``
(``solver.flops_per_call``: 2 · n_params · tokens for a `transformers` model). Tasks are dicts
``{"question": str, "choices": [str, ...], "answer": int, "type"?: str}`` (digits demo: ``{"x", "answer"}``);
with a ``type`` field the game is also solved per task type (success rates differ by type).

Solvers: `hf_solver` (multiple choice by log-likelihood, `iclr26_core.evaluation.mc_accuracy`) and
`digits_solvers` (offline demo: a logistic regression "standard" model and an MLP ensemble "reasoning" model
on scikit-learn's digits).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_core.errors import UserError


# ---------------------------------------------------------------------------------------------- tasks
def load_tasks(path: str | Path) -> list[dict[str, Any]]:
    """Multiple-choice tasks from a JSON-lines file (one task per line); bad lines are a `UserError`."""
    from iclr26_core.fs import read_jsonl

    return [check_task(task, where) for where, task in read_jsonl(path, "task file")]


def check_task(task: Any, where: str) -> dict[str, Any]:
    if not isinstance(task, dict) or not {"question", "choices", "answer"} <= set(task):
        raise UserError(f"{where}: a task needs the keys question, choices, answer")
    choices, answer = task["choices"], task["answer"]
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise UserError(f"{where}: choices must be a list of at least two strings")
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
        raise UserError(f"{where}: answer must be an index into choices, got {answer!r}")
    return task


def generated_tasks(n: int, seed: int = 0, n_choices: int = 4) -> list[dict[str, Any]]:
    """``n`` small arithmetic multiple-choice tasks ("add" and "multiply" types), deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    tasks = []
    for k in range(n):
        a, b = (int(v) for v in rng.integers(1, 10, 2))
        kind = "add" if k % 2 == 0 else "multiply"
        right = a + b if kind == "add" else a * b
        wrong = {right}
        while len(wrong) < n_choices:
            wrong.add(max(0, right + int(rng.integers(-5, 6))))
        options = sorted(wrong)
        rng.shuffle(options)
        op = "+" if kind == "add" else "*"
        tasks.append(
            {
                "question": f"Q: {a} {op} {b} = ? A:",
                "choices": [f" {v}" for v in options],
                "answer": options.index(right),
                "type": kind,
            }
        )
    return tasks


# -------------------------------------------------------------------------------------------- solvers
class HFSolver:
    """A `transformers` causal LM answering multiple-choice tasks by log-likelihood; counts tokens."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "") -> None:
        from iclr26_core.models import count_parameters

        self.model, self.tokenizer = model.eval(), tokenizer
        self.name = name or type(model).__name__
        self.n_params = count_parameters(model)
        self.tokens = 0
        self.calls = 0

    def __call__(self, task: dict[str, Any]) -> int:
        from iclr26_core.evaluation import mc_accuracy

        res = mc_accuracy(self.model, self.tokenizer, [task["question"]], [task["choices"]], [task["answer"]])
        q_len = len(self.tokenizer(task["question"], add_special_tokens=False)["input_ids"])
        self.tokens += sum(
            q_len + len(self.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in task["choices"]
        )
        self.calls += 1
        return int(res["predictions"][0])

    @property
    def flops_per_call(self) -> float:
        """2 · n_params · tokens per call (forward passes only), averaged over the calls so far."""
        return 2.0 * self.n_params * self.tokens / max(self.calls, 1)


def hf_solver(model: Any, tokenizer: Any, name: str = "") -> HFSolver:
    """A solver from a `transformers` model and its tokenizer (multiple choice by log-likelihood)."""
    return HFSolver(model, tokenizer, name)


class _SklearnSolver:
    def __init__(self, models: list[Any], flops: float, name: str) -> None:
        self.models, self.flops_per_call, self.name = models, flops, name

    def __call__(self, task: dict[str, Any]) -> int:
        x = np.asarray(task["x"], dtype=float)[None]
        probs = sum(m.predict_proba(x) for m in self.models)
        return int(np.argmax(probs))

    def confidence(self, task: dict[str, Any]) -> float:
        x = np.asarray(task["x"], dtype=float)[None]
        return float(max(sum(m.predict_proba(x) for m in self.models)[0]) / len(self.models))


def digits_solvers(
    seed: int = 0, n_test: int = 300, ensemble: int = 3, hidden: int = 128
) -> tuple[list[dict[str, Any]], list[Any]]:
    """(held-out tasks, [standard, reasoning]) on scikit-learn's digits: a logistic regression on 8×8 pixels
    and an ensemble of ``ensemble`` MLPs; FLOPs per call counted from the layer sizes."""
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=n_test, random_state=seed, stratify=y)
    Xtr, ytr = Xtr[:200], ytr[:200]  # a small training set keeps the two models apart
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        standard = LogisticRegression(max_iter=30).fit(Xtr[:, ::4], ytr)  # every 4th pixel: a weak model
        mlps = [
            MLPClassifier((hidden,), max_iter=300, random_state=seed + k).fit(Xtr, ytr)
            for k in range(ensemble)
        ]
    d = X.shape[1]
    flops_std = 2.0 * (d // 4) * 10
    flops_mlp = ensemble * 2.0 * (d * hidden + hidden * 10)

    class _Strided(_SklearnSolver):
        def __call__(self, task: dict[str, Any]) -> int:
            return super().__call__({"x": np.asarray(task["x"])[::4]})

        def confidence(self, task: dict[str, Any]) -> float:
            return super().confidence({"x": np.asarray(task["x"])[::4]})

    tasks = [{"x": x.tolist(), "answer": int(a)} for x, a in zip(Xte, yte)]
    return tasks, [_Strided([standard], flops_std, "logreg"), _SklearnSolver(mlps, flops_mlp, "mlp-ensemble")]


# ------------------------------------------------------------------------------------------- estimate
def _measure(
    solver: Callable[[dict[str, Any]], int], tasks: Sequence[dict[str, Any]]
) -> dict[str, np.ndarray]:
    correct, seconds = np.zeros(len(tasks), dtype=bool), np.zeros(len(tasks))
    for k, task in enumerate(tasks):
        t0 = time.perf_counter()
        pred = solver(task)
        seconds[k] = time.perf_counter() - t0
        correct[k] = pred == task["answer"]
    return {"correct": correct, "seconds": seconds}


def _game_params(acc: float, n: int) -> float:
    """p for the game: the accuracy, floored at 1/(2n) (the game needs p > 0; a model that solved none)."""
    return max(acc, 0.5 / n)


def estimate_params(
    solvers: Sequence[Callable[[dict[str, Any]], int]],
    tasks: Sequence[dict[str, Any]],
    *,
    value: float,
    cost_per_call: Sequence[float] | None = None,
    time_value: float = 1.0,
    churn_penalty: float = 0.0,
    flops_unit: float = 1e9,
    tie_break: str = "provider",
) -> dict[str, Any]:
    """(p, t, c) of two solvers on ``tasks`` and the game they define (solved), as plain data.

    Returns {"models": [{name, accuracy, p, t, c, seconds_per_query, flops_per_call}, ×2], "n_tasks",
    "game": `RoutingGame`, "solution": ``game.solve()``, "by_type": {type: {...}} when tasks have types}.
    """
    from .game import RoutingGame

    if len(solvers) != 2:
        raise UserError(f"estimate needs exactly two solvers (standard, reasoning), got {len(solvers)}")
    if len(tasks) == 0:
        raise UserError("estimate needs at least one task")
    if cost_per_call is not None and len(cost_per_call) != 2:
        raise UserError("cost_per_call needs one cost per solver (two numbers)")
    if not time_value > 0:
        raise UserError(f"time_value must be > 0, got {time_value}")
    meas = [_measure(s, tasks) for s in solvers]
    models = []
    for k, (solver, m) in enumerate(zip(solvers, meas)):
        flops = getattr(solver, "flops_per_call", None)
        if cost_per_call is not None:
            cost = float(cost_per_call[k])
        elif flops is None:
            raise UserError(f"solver {k + 1} has no flops_per_call; pass cost_per_call")
        else:
            cost = float(flops) / flops_unit
        acc = float(m["correct"].mean())
        models.append(
            {
                "name": getattr(solver, "name", f"solver{k + 1}"),
                "accuracy": acc,
                "p": _game_params(acc, len(tasks)),
                "seconds_per_query": float(m["seconds"].mean()),
                "t": float(m["seconds"].mean()) * time_value,
                "flops_per_call": None if flops is None else float(flops),
                "c": cost,
            }
        )

    def game_of(ps: list[float], ts: list[float]) -> RoutingGame:
        cs = [m["c"] for m in models]
        return RoutingGame(
            ps[0], ps[1], ts[0], ts[1], cs[0], cs[1], value, churn_penalty, tie_break=tie_break
        )

    game = game_of([m["p"] for m in models], [m["t"] for m in models])
    out: dict[str, Any] = {"models": models, "n_tasks": len(tasks), "game": game, "solution": game.solve()}
    types = sorted({t["type"] for t in tasks if "type" in t})
    if types:
        out["by_type"] = {}
        for kind in types:
            idx = np.array([t.get("type") == kind for t in tasks])
            n = int(idx.sum())
            ps = [_game_params(float(m["correct"][idx].mean()), n) for m in meas]
            ts = [float(m["seconds"][idx].mean()) * time_value for m in meas]
            g = game_of(ps, ts)
            out["by_type"][kind] = {"n": n, "p": ps, "t": ts, "solution": g.solve()}
    return out
