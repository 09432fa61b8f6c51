"""`lm_fitness`: SPRIG's fitness on any `transformers` causal LM and multiple-choice task types.

For a system prompt s and a question q the model sees the system slot + user turn through the tokenizer's chat
template (``chat_template=None``: the tokenizer's own if it has one, else the plain fallback
``"{system}\\n\\n{question}\\nAnswer:"``; ``False``: always plain; a string: that Jinja template or, when it contains
``{question}``, a plain format string). The question block lists the options as ``A. ...`` lines and each
option's continuation is ``option_prefix + letter`` (``show_options=False``: the option text itself).

``scoring="loglik"`` (default): the predicted option maximises Σ log p(continuation tokens | prompt), where the
continuation tokens are those of ``prompt + continuation`` after the prompt's own tokens (so a BPE model scores
" B", not "B"). When every continuation is a single token, one forward pass of the prompt scores all options (the
shortcut is skipped otherwise). ``kv_cache=True`` scores one question at a time with a key-value cache instead:
the tokens a prompt shares with the previous one (chat template, system prompt) are not recomputed (the fast
path on a CPU). A question's ``lead`` opens the answer instead of "Answer:" and its ``continuations`` replace
the scored option texts (lm-eval's continuation scoring inside the chat template). ``scoring="generate"``: greedy generation, the first option letter parsed (the
paper's protocol). One evaluation of one prompt on one question is one question-evaluation.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr26_core.errors import UserError

from .components import SystemPrompt
from .fitness import Fitness
from .tasks import MCQuestion, MCTask

LETTERS = string.ascii_uppercase


class LMFitness(Fitness):
    """See the module docstring; build it with `lm_fitness`."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        tasks: Sequence[MCTask],
        *,
        n_questions: int = 10,
        split: str = "train",
        scoring: str = "loglik",
        chat_template: str | bool | None = None,
        show_options: bool = True,
        option_prefix: str = " ",
        batch_size: int = 32,
        max_new_tokens: int = 16,
        kv_cache: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not tasks:
            raise UserError("lm_fitness needs at least one task")
        if scoring not in ("loglik", "generate"):
            raise UserError(f"unknown scoring {scoring!r}; choose loglik or generate")
        if n_questions < 1:
            raise UserError(f"n_questions must be >= 1, got {n_questions}")
        if scoring == "generate" and not show_options:
            raise UserError("scoring='generate' parses an option letter: it needs show_options=True")
        self.model, self.tokenizer, self.tasks = model, tokenizer, list(tasks)
        self.task_names = [t.name for t in self.tasks]
        self.n_questions, self.default_split, self.scoring = int(n_questions), split, scoring
        self.show_options, self.option_prefix = show_options, option_prefix
        self.batch_size, self.max_new_tokens = int(batch_size), int(max_new_tokens)
        self.kv_cache = bool(kv_cache)
        self.rng = np.random.default_rng(seed)
        self.stats = {"one_pass": 0, "per_option": 0, "cached": 0}
        self.task_prompts: dict[str, str] = {}  # task name -> task prompt (user turn); see `lm_task_fitness`
        self._plain = None
        self._jinja = None
        if isinstance(chat_template, str) and "{question}" in chat_template:
            self._plain = chat_template
        elif isinstance(chat_template, str):
            self._jinja = chat_template
        elif chat_template is None and getattr(tokenizer, "chat_template", None):
            self._jinja = tokenizer.chat_template

    # ------------------------------------------------------------------------------------------ formatting
    def question_block(self, q: MCQuestion) -> str:
        if not self.show_options:
            return q.question
        return q.question + "\n" + "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(q.options))

    def continuations(self, q: MCQuestion) -> list[str]:
        if q.continuations is not None:
            return list(q.continuations)
        if self.show_options:
            return [self.option_prefix + LETTERS[i] for i in range(len(q.options))]
        return [self.option_prefix + o for o in q.options]

    def format_prompt(self, system: str, q: MCQuestion, task_prompt: str = "") -> str:
        """The text the model reads before the answer (a task prompt, if any, opens the user turn)."""
        block = (task_prompt + "\n" if task_prompt else "") + self.question_block(q)
        lead = "Answer:" if q.lead is None else q.lead
        if self._jinja is not None:
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": block}
            ]
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, chat_template=self._jinja
            )
            return text + lead
        if self._plain is not None:
            return self._plain.format(system=system, question=block)
        return (f"{system}\n\n" if system else "") + f"{block}\n{lead}"

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def option_tokens(self, prompt: str, q: MCQuestion) -> tuple[list[int], list[list[int]]]:
        """(prompt ids, each continuation's ids as tokenised after the prompt)."""
        p_ids = self._ids(prompt)
        conts = []
        for cont in self.continuations(q):
            full = self._ids(prompt + cont)
            conts.append(full[len(p_ids) :] if full[: len(p_ids)] == p_ids else self._ids(cont))
        return p_ids, conts

    # ------------------------------------------------------------------------------------------ scoring
    def _logits(self, seqs: list[list[int]]):
        """Yield (sequence indices, logits [B, T, V]) over right-padded batches, shortest sequences first."""
        import torch

        device = next(self.model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        with torch.no_grad():
            for s in range(0, len(order), self.batch_size):
                idx = order[s : s + self.batch_size]
                width = max(len(seqs[i]) for i in idx)
                ids = torch.full((len(idx), width), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for r, i in enumerate(idx):
                    ids[r, : len(seqs[i])] = torch.tensor(seqs[i])
                    mask[r, : len(seqs[i])] = 1
                yield idx, self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits

    def _forward_rows(self, seqs: list[list[int]], rows: list[list[tuple[int, int]]]) -> list[float]:
        """Σ log p(target | prefix) over the (position, target) pairs of each sequence."""
        import torch

        out = [0.0] * len(seqs)
        for idx, logits in self._logits(seqs):
            for r, i in enumerate(idx):
                pos = torch.tensor([p for p, _ in rows[i]], device=logits.device)
                tgt = torch.tensor([t for _, t in rows[i]], device=logits.device)
                logp = torch.log_softmax(logits[r, pos].float(), -1)
                out[i] = float(logp.gather(-1, tgt[:, None]).sum())
        return out

    def _predict_loglik(self, items: list[tuple[str, MCQuestion]]) -> list[int]:
        if self.kv_cache:
            return [int(np.argmax(s)) for s in self._scores_cached(items)]
        seqs, rows, owner = [], [], []
        for k, (prompt, q) in enumerate(items):
            p_ids, conts = self.option_tokens(prompt, q)
            if all(len(c) == 1 for c in conts):  # one pass scores every option
                self.stats["one_pass"] += 1
                seqs.append(p_ids)
                rows.append([(len(p_ids) - 1, c[0]) for c in conts])
                owner.append((k, -1))
            else:
                self.stats["per_option"] += 1
                for j, c in enumerate(conts):
                    seqs.append(p_ids + c)
                    rows.append([(len(p_ids) - 1 + i, t) for i, t in enumerate(c)])
                    owner.append((k, j))
        preds = [0] * len(items)
        singles = [i for i, (_, j) in enumerate(owner) if j < 0]
        if singles:
            scores = self._forward_one_pass([seqs[i] for i in singles], [rows[i] for i in singles])
            for i, opt_scores in zip(singles, scores, strict=True):
                preds[owner[i][0]] = int(np.argmax(opt_scores))
        multi = [i for i, (_, j) in enumerate(owner) if j >= 0]
        if multi:
            best = [-np.inf] * len(items)
            scores = self._forward_rows([seqs[i] for i in multi], [rows[i] for i in multi])
            for i, sc in zip(multi, scores, strict=True):
                k, j = owner[i]
                if sc > best[k]:
                    best[k], preds[k] = sc, j
        return preds

    def _forward_one_pass(
        self, seqs: list[list[int]], rows: list[list[tuple[int, int]]]
    ) -> list[list[float]]:
        """For each prompt: log p of each option's single token at the last position (one forward pass)."""
        import torch

        out: list[list[float]] = [[] for _ in seqs]
        for idx, logits in self._logits(seqs):
            last = torch.tensor([len(seqs[i]) - 1 for i in idx], device=logits.device)
            logp = torch.log_softmax(logits[torch.arange(len(idx), device=logits.device), last].float(), -1)
            for r, i in enumerate(idx):
                out[i] = [float(logp[r, t]) for _, t in rows[i]]
        return out

    def _scores_cached(self, items: list[tuple[str, MCQuestion]]) -> list[list[float]]:
        """Σ log p of every option's continuation, one question at a time with a key-value cache: the tokens a
        prompt shares with the previous one (the chat template and system prompt) are not recomputed, and each
        option's later tokens are scored from the prompt's cache (exact; the fast path on a CPU)."""
        import torch
        from transformers import DynamicCache

        device = next(self.model.parameters()).device
        prev: list[int] = []
        cache = DynamicCache()
        out = []
        with torch.no_grad():
            for prompt, q in items:
                p_ids, conts = self.option_tokens(prompt, q)
                keep = 0
                while keep < min(len(prev), len(p_ids) - 1) and prev[keep] == p_ids[keep]:
                    keep += 1
                _crop(cache, keep)
                logits = _extend(self.model, p_ids[keep:], cache, device, last=1)
                last = torch.log_softmax(logits[0, -1].float(), -1)
                scores = []
                for c in conts:
                    score = float(last[c[0]])
                    if len(c) > 1:
                        more = _extend(self.model, c[:-1], cache, device)
                        logp = torch.log_softmax(more[0].float(), -1)
                        score += float(logp[torch.arange(len(c) - 1), torch.tensor(c[1:])].sum())
                        _crop(cache, len(p_ids))
                    scores.append(score)
                self.stats["cached"] += 1
                out.append(scores)
                prev = p_ids
        return out

    def _predict_generate(self, items: list[tuple[str, MCQuestion]]) -> list[int]:
        import torch

        device = next(self.model.parameters()).device
        preds = []
        for prompt, q in items:
            ids = torch.tensor([self._ids(prompt)], device=device)
            with torch.no_grad():
                gen = self.model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                )
            text = self.tokenizer.decode(gen[0, ids.shape[1] :], skip_special_tokens=True)
            letters = LETTERS[: len(q.options)]
            m = re.search(rf"\b([{letters}])\b", text)
            preds.append(letters.index(m.group(1)) if m else -1)
        return preds

    # ------------------------------------------------------------------------------------------ Fitness
    def _sample(self, split: str) -> list[list[MCQuestion]]:
        out = []
        for t in self.tasks:
            pool = t.splits[split]
            if split == "train" and len(pool) > self.n_questions:
                pool = [pool[i] for i in self.rng.choice(len(pool), self.n_questions, replace=False)]
            out.append(pool)
        return out

    def _questions(self, split: str) -> int:
        return sum(
            min(self.n_questions, len(t.splits[split])) if split == "train" else len(t.splits[split])
            for t in self.tasks
        )

    def correct(
        self, prompts: Sequence[SystemPrompt], split: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(correct [P, Q] 0/1, task index [Q]) on one question sample shared by all prompts; counts the
        question-evaluations like `per_task` (for paired comparisons and confidence intervals)."""
        split = split or self.default_split
        prompts = [p if isinstance(p, SystemPrompt) else SystemPrompt(p) for p in prompts]
        out = self._correct(prompts, self._sample(split))
        self.evaluations += self.cost(len(prompts), split)
        return out

    def _correct(self, prompts: Sequence[SystemPrompt], sample: list[list[MCQuestion]]):
        items = []
        task_of = np.array([t_i for t_i, qs in enumerate(sample) for _ in qs], int)
        for prompt in prompts:
            system = prompt.render()
            items += [
                (self.format_prompt(system, q, self.task_prompts.get(t.name, "")), q)
                for t, qs in zip(self.tasks, sample, strict=True)
                for q in qs
            ]
        predict = self._predict_generate if self.scoring == "generate" else self._predict_loglik
        preds = predict(items)
        hits = np.array([pred == q.answer for (_, q), pred in zip(items, preds, strict=True)], float)
        return hits.reshape(len(prompts), len(task_of)), task_of

    def _per_task(self, prompts: Sequence[SystemPrompt], split: str) -> np.ndarray:
        sample = self._sample(split)  # the same fresh questions for every prompt of this call
        hits, task_of = self._correct(prompts, sample)
        counts = np.bincount(task_of, minlength=len(sample))
        sums = np.stack([np.bincount(task_of, weights=h, minlength=len(sample)) for h in hits])
        return sums / np.maximum(counts, 1)[None, :]


def _extend(model: Any, ids: list[int], cache: Any, device: Any, last: int = 0) -> Any:
    """Logits [1, len(ids), V] of ``ids`` after the cached positions (the cache grows by ``ids``); ``last`` > 0:
    only the last ``keep`` positions' logits (the LM head skips the others)."""
    import warnings

    import torch

    with warnings.catch_warnings():  # transformers 5.x renames past_key_values -> cache (FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        x = torch.tensor([ids], device=device)
        extra = {"logits_to_keep": last} if last and _takes(model, "logits_to_keep") else {}
        return model(input_ids=x, past_key_values=cache, use_cache=True, **extra).logits


def _takes(model: Any, name: str) -> bool:
    import inspect

    return name in inspect.signature(model.forward).parameters


def _crop(cache: Any, length: int) -> None:
    """Keep the first ``length`` positions of a `transformers` cache (a negative crop works across versions)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def lm_fitness(model: Any, tokenizer: Any, tasks: Sequence[MCTask], **kwargs: Any) -> LMFitness:
    """A `Fitness` that scores system prompts on ``model`` by multiple-choice accuracy (module docstring);
    ``kwargs`` are `LMFitness`'s (``n_questions=10, split="train", scoring="loglik", chat_template=None`` ...)."""
    return LMFitness(model, tokenizer, tasks, **kwargs)
