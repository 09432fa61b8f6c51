"""Solvers that *sample* answers, so that a retry is a fresh, independent draw (the game's i.i.d. passes).

A solver has ``name``, ``n_params`` (for FLOPs), ``attempts(task, n, rng) -> Attempts`` (``n`` independent
passes at the solver's temperature) and ``seconds_per_token(repeats, clock) -> {"prefill", "decode"}`` (the
median over ``repeats`` timed forward passes of CPU seconds per token, ``clock="cpu"``: robust to other
processes on the machine, unlike wall clock). The latency of one pass is then
``prompt_tokens × prefill + new_tokens × decode``: token counts × measured per-token time.

* `HFSampler` — a ``transformers`` causal LM. Multiple-choice tasks ``{"question", "choices", "answer"}``:
  the answer is drawn from softmax(log-likelihood of each choice / T) (the model's own distribution over the
  options; a pass scores every choice). Cloze tasks ``{"prompt", "target"}``: the next tokens are sampled at
  temperature T with a KV cache; a pass succeeds iff the sampled tokens spell ``target`` and the token after
  it does not continue the word.
* `digits_solvers` — the offline scikit-learn demo; an answer is drawn from predict_proba^(1/T).
* `BernoulliSolver` — succeeds with a known probability per task (by construction: the tests' ground truth).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from iclr26_core.errors import UserError

CLOCKS = ("cpu", "wall")


class Attempts(NamedTuple):
    """``n`` independent passes on one task: which succeeded and the tokens each pass processed."""

    correct: np.ndarray  # (n,) bool
    prompt_tokens: np.ndarray  # (n,) tokens read per pass (prefill)
    new_tokens: np.ndarray  # (n,) tokens generated per pass (decode)


def timed(fn: Callable[[], Any], repeats: int, clock: str = "cpu") -> list[float]:
    """Seconds of ``repeats`` calls of ``fn`` (one warm-up call first); ``clock="cpu"``: process CPU time."""
    if clock not in CLOCKS:
        raise UserError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    if repeats < 1:
        raise UserError(f"repeats must be >= 1, got {repeats}")
    now = time.process_time if clock == "cpu" else time.perf_counter
    fn()
    out = []
    for _ in range(repeats):
        t0 = now()
        fn()
        out.append(now() - t0)
    return out


def _probs(scores: np.ndarray, temperature: float) -> np.ndarray:
    z = np.asarray(scores, dtype=float) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


def _check_temperature(temperature: float) -> float:
    if not temperature > 0:
        raise UserError(f"temperature must be > 0 (sampled answers), got {temperature}")
    return float(temperature)


class BernoulliSolver:
    """Succeeds on task k with probability ``rates[task["id"]]`` (i.i.d. across passes): known ground truth."""

    def __init__(self, rates: Any, name: str = "bernoulli", seconds: float = 1e-3, tokens: int = 10) -> None:
        self.rates, self.name, self.seconds, self.tokens = np.asarray(rates, float), name, seconds, tokens
        self.n_params = 1

    def attempts(self, task: dict[str, Any], n: int, rng: np.random.Generator) -> Attempts:
        ok = rng.random(n) < self.rates[task["id"]]
        return Attempts(ok, np.full(n, self.tokens), np.zeros(n, dtype=int))

    def seconds_per_token(self, repeats: int = 5, clock: str = "cpu") -> dict[str, list[float]]:
        return {"prefill": [self.seconds] * repeats, "decode": [0.0] * repeats}


class HFSampler:
    """A ``transformers`` causal LM answering by sampling at ``temperature`` (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        name: str = "",
        temperature: float = 1.0,
        max_prompt_tokens: int = 64,
    ) -> None:
        from iclr26_core.models import count_parameters

        self.model, self.tokenizer = model.eval(), tokenizer
        self.name = name or type(model).__name__
        self.temperature = _check_temperature(temperature)
        self.max_prompt_tokens = int(max_prompt_tokens)
        self.n_params = count_parameters(model)
        self._scores: dict[tuple, np.ndarray] = {}

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def attempts(self, task: dict[str, Any], n: int, rng: np.random.Generator) -> Attempts:
        if "target" in task:
            return self._cloze(task, n, rng)
        key = (task["question"], tuple(task["choices"]))
        if key not in self._scores:  # the log-likelihoods are deterministic: score once, sample n times
            from iclr26_core.evaluation import mc_accuracy

            res = mc_accuracy(
                self.model, self.tokenizer, [task["question"]], [task["choices"]], [task["answer"]]
            )
            self._scores[key] = np.asarray(res["scores"][0], dtype=float)
        picks = rng.choice(len(task["choices"]), size=n, p=_probs(self._scores[key], self.temperature))
        q_len = len(self._ids(task["question"]))
        tokens = sum(q_len + len(self._ids(c)) for c in task["choices"])
        return Attempts(picks == task["answer"], np.full(n, tokens), np.zeros(n, dtype=int))

    def _cloze(self, task: dict[str, Any], n: int, rng: np.random.Generator) -> Attempts:
        import torch

        ids = self._ids(task["prompt"])[-self.max_prompt_tokens :]
        target = self._ids(task["target"])
        gen = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
        with torch.no_grad():
            out = self.model(torch.tensor([ids]), use_cache=True)
            cache = out.past_key_values
            cache.batch_repeat_interleave(n)  # one prefill, then n independent continuations
            logits = out.logits[:, -1].float().expand(n, -1)
            drawn = []
            for k in range(len(target) + 1):
                nxt = torch.multinomial(torch.softmax(logits / self.temperature, -1), 1, generator=gen)
                drawn.append(nxt)
                if k == len(target):
                    break
                out = self.model(nxt, past_key_values=cache, use_cache=True)
                cache, logits = out.past_key_values, out.logits[:, -1].float()
        drawn = torch.cat(drawn, 1).numpy()
        spelled = (drawn[:, : len(target)] == np.asarray(target)).all(1)
        ends = np.array([not self.tokenizer.decode([int(t)])[:1].isalnum() for t in drawn[:, -1]])
        return Attempts(spelled & ends, np.full(n, len(ids)), np.full(n, len(target) + 1))

    def seconds_per_token(
        self, repeats: int = 7, clock: str = "cpu", length: int = 48
    ) -> dict[str, list[float]]:
        """Per-token seconds of a ``length``-token prefill and of one decode step after it (batch 1)."""
        import torch

        vocab = int(self.model.config.vocab_size)
        ids = (torch.arange(length + 1) * 7919 % vocab)[
            None
        ]  # fixed tokens: the cost does not depend on them
        ids, step = ids[:, :length], ids[:, length:]
        with torch.no_grad():
            cache = self.model(ids, use_cache=True).past_key_values

            def decode() -> None:
                self.model(step, past_key_values=cache, use_cache=True)
                cache.crop(-1)  # back to the prompt: every repeat times the same step

            prefill = [s / length for s in timed(lambda: self.model(ids, use_cache=True), repeats, clock)]
            return {"prefill": prefill, "decode": timed(decode, repeats, clock)}


class _SklearnSolver:
    """A scikit-learn ensemble: ``__call__`` is its argmax answer, ``attempts`` samples proba^(1/T)."""

    def __init__(self, models: list[Any], flops: float, name: str, stride: int = 1, temperature: float = 1.0):
        self.models, self.flops_per_call, self.name, self.stride = models, flops, name, stride
        self.temperature = _check_temperature(temperature)
        self.n_params = flops / 2.0  # one "token" per pass: FLOPs = 2 · n_params

    def proba(self, task: dict[str, Any]) -> np.ndarray:
        x = np.asarray(task["x"], dtype=float)[:: self.stride][None]
        return sum(m.predict_proba(x) for m in self.models)[0] / len(self.models)

    def __call__(self, task: dict[str, Any]) -> int:
        return int(np.argmax(self.proba(task)))

    def confidence(self, task: dict[str, Any]) -> float:
        return float(self.proba(task).max())

    def attempts(self, task: dict[str, Any], n: int, rng: np.random.Generator) -> Attempts:
        pr = _probs(np.log(np.maximum(self.proba(task), 1e-300)), self.temperature)
        picks = rng.choice(len(pr), size=n, p=pr)
        return Attempts(picks == task["answer"], np.ones(n, dtype=int), np.zeros(n, dtype=int))

    def seconds_per_token(
        self, repeats: int = 7, clock: str = "cpu", inner: int = 50
    ) -> dict[str, list[float]]:
        task = {"x": np.zeros(64)}

        def many() -> None:
            for _ in range(inner):
                self.proba(task)

        return {"prefill": [s / inner for s in timed(many, repeats, clock)], "decode": [0.0] * repeats}


def digits_solvers(
    seed: int = 0, n_test: int = 300, ensemble: int = 3, hidden: int = 128, temperature: float = 1.0
) -> tuple[list[dict[str, Any]], list[Any]]:
    """(held-out tasks, [standard, reasoning]) on scikit-learn's digits: a logistic regression on every 4th
    pixel and an ensemble of ``ensemble`` MLPs; FLOPs per call counted from the layer sizes."""
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
    tasks = [{"x": x.tolist(), "answer": int(a)} for x, a in zip(Xte, yte)]
    return tasks, [
        _SklearnSolver([standard], flops_std, "logreg", stride=4, temperature=temperature),
        _SklearnSolver(mlps, flops_mlp, "mlp-ensemble", temperature=temperature),
    ]


def hf_solver(model: Any, tokenizer: Any, name: str = "", temperature: float = 1.0) -> HFSampler:
    """A sampling solver from a ``transformers`` model and its tokenizer."""
    return HFSampler(model, tokenizer, name, temperature)
