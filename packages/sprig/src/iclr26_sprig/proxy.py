"""The proxy reward R(s) of SPRIG's later GA code: a scorer trained on really evaluated prompts with the pairwise
loss −log σ(R(chosen) − R(rejected) − m), m = 100 × (score(chosen) − score(rejected)), pairs subsampled to
10 × #prompts.

* ``"ridge"`` (default): R(s) = w·φ(s), φ = bag of components (counts by identity) + position features
  (the component's centred position 1 − 2(pos−1)/(m−1)) + length; the pairwise loss plus (λ/2)·‖w‖², L-BFGS.
* ``"hf:<path>"``: a transformers sequence-classification model with one output (the official code uses
  ModernBERT-base) trained for one epoch on the rendered prompts with the same loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iclr26_core.errors import UserError

from .components import Component, SystemPrompt


def pairs(scores: np.ndarray, n_pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(chosen, rejected) index arrays of up to ``n_pairs`` random pairs with different scores."""
    n = len(scores)
    if n < 2:
        return np.zeros(0, int), np.zeros(0, int)
    i, j = rng.integers(0, n, n_pairs), rng.integers(0, n, n_pairs)
    keep = scores[i] != scores[j]
    i, j = i[keep], j[keep]
    up = scores[i] > scores[j]
    return np.where(up, i, j), np.where(up, j, i)


class RidgeProxy:
    """Linear R(s) on bag-of-components + position features, fit with the pairwise margin loss."""

    def __init__(self, components: Sequence[Component], l2: float = 0.1, seed: int = 0) -> None:
        self.index = {c.identity: i for i, c in enumerate(components)}
        self.l2, self.rng = float(l2), np.random.default_rng(seed)
        self.w = np.zeros(2 * len(self.index) + 1)

    def features(self, prompts: Sequence[SystemPrompt]):
        """φ(s) for every prompt as a sparse [P, 2M + 1] matrix."""
        from scipy.sparse import csr_matrix

        m_pool = len(self.index)
        rows, cols, vals = [], [], []
        for r, p in enumerate(prompts):
            m = len(p)
            for pos, c in enumerate(p):
                k = self.index[c.identity]
                rows += [r, r]
                cols += [k, m_pool + k]
                vals += [1.0, 0.0 if m == 1 else 1 - 2 * pos / (m - 1)]
            rows.append(r)
            cols.append(2 * m_pool)
            vals.append(float(m))
        return csr_matrix((vals, (rows, cols)), shape=(len(prompts), 2 * m_pool + 1))

    def fit(self, prompts: Sequence[SystemPrompt], scores: Sequence[float]) -> RidgeProxy:
        from scipy.optimize import minimize

        y = np.asarray(scores, float)
        ch, rj = pairs(y, 10 * len(y), self.rng)
        if len(ch) == 0:
            return self
        x = self.features(prompts)
        d, margin = x[ch] - x[rj], 100.0 * (y[ch] - y[rj])

        def loss(w):
            u = d @ w - margin
            val = np.logaddexp(0, -u).mean() + 0.5 * self.l2 * w @ w
            grad = -(d.T @ (1 / (1 + np.exp(u)))) / len(u) + self.l2 * w
            return val, grad

        self.w = minimize(loss, self.w, jac=True, method="L-BFGS-B", options={"maxiter": 50}).x
        return self

    def predict(self, prompts: Sequence[SystemPrompt]) -> np.ndarray:
        return self.features(prompts) @ self.w


class HFProxy:
    """R(s) = a transformers sequence-classification model (one output) on the rendered prompt."""

    def __init__(self, path: str, seed: int = 0, lr: float = 2e-5, batch_size: int = 16) -> None:
        from iclr26_core.models import load_model, load_tokenizer

        self.model = load_model(path, "AutoModelForSequenceClassification", num_labels=1)
        self.tokenizer = load_tokenizer(path)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.rng, self.lr, self.batch_size, self.seed = np.random.default_rng(seed), lr, batch_size, seed

    def _score(self, texts: list[str]):
        enc = self.tokenizer(
            texts or [""], return_tensors="pt", padding=True, truncation=True, max_length=512
        )
        return self.model(**enc).logits[:, 0]

    def fit(self, prompts: Sequence[SystemPrompt], scores: Sequence[float]) -> HFProxy:
        """One epoch over 10 × #prompts pairs with the pairwise margin loss."""
        import torch

        y = np.asarray(scores, float)
        ch, rj = pairs(y, 10 * len(y), self.rng)
        texts = [p.render() for p in prompts]
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.lr)
        self.model.train()
        for s in range(0, len(ch), self.batch_size):
            c, r = ch[s : s + self.batch_size], rj[s : s + self.batch_size]
            out = self._score([texts[i] for i in c] + [texts[i] for i in r])
            margin = torch.as_tensor(100.0 * (y[c] - y[r]), dtype=out.dtype)
            loss = torch.nn.functional.softplus(-(out[: len(c)] - out[len(c) :] - margin)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        self.model.eval()
        return self

    def predict(self, prompts: Sequence[SystemPrompt]) -> np.ndarray:
        import torch

        texts = [p.render() for p in prompts]
        out = []
        with torch.no_grad():
            for s in range(0, len(texts), 64):
                out.append(self._score(texts[s : s + 64]).float().numpy())
        return np.concatenate(out) if out else np.zeros(0)


def make_proxy(proxy: str, components: Sequence[Component], seed: int = 0):
    """``"ridge"`` or ``"hf:<path>"``."""
    if proxy == "ridge":
        return RidgeProxy(components, seed=seed)
    if proxy.startswith("hf:") and len(proxy) > 3:
        return HFProxy(proxy[3:], seed=seed)
    raise UserError(f"unknown proxy {proxy!r}; use 'ridge' or 'hf:<model path or hub id>'")
