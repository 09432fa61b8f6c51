"""Real-model data: JSONL prompts / (prompt, response) rows, chat-formatted with the tokenizer's template.

Fine-tuning rows get labels −100 on the prompt and on padding and an EOS appended (spec Method step 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from iclr26_core.errors import UserError

from .routing import warn_truncated


def _records(path: Path):
    """(line or index, record) of a JSON-lines file, or of a JSON file holding a list (the safety-only set)."""
    text = path.read_text()
    if path.suffix == ".json" and text.lstrip().startswith("["):
        try:
            yield from enumerate(json.loads(text), 1)
        except json.JSONDecodeError:
            raise UserError(f"{path} is not valid JSON") from None
        return
    for k, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield k, json.loads(line)
        except json.JSONDecodeError:
            raise UserError(f"{path}:{k} is not valid JSON") from None


def read_jsonl(
    path: str | Path, fields: list[str], n: int | None = None, optional: tuple[str, ...] = ()
) -> list[dict[str, str]]:
    """The first ``n`` rows of a JSONL file (or a .json list) with the given fields (+ ``optional`` ones)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist")
    rows = []
    for k, row in _records(path):
        missing = [f for f in fields if not isinstance(row, dict) or f not in row]
        if missing:
            raise UserError(f"{path}:{k} has no field {missing[0]!r}")
        rows.append({f: str(row[f]) for f in (*fields, *optional) if f in row and row[f] is not None})
        if n is not None and len(rows) >= n:
            break
    if not rows:
        raise UserError(f"{path} has no rows: the prompts are empty")
    return rows


def format_prompt(tokenizer: Any, text: str, system: str | None = None) -> str:
    """The chat template (with ``system`` as the system turn when given) and the generation prompt when the
    tokenizer has a template; else the text itself (after the system text and a blank line)."""
    if getattr(tokenizer, "chat_template", None):
        msgs = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": text}
        ]
        return tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    return f"{system}\n\n{text}" if system else text


def _pad_id(tokenizer: Any) -> int:
    pid = tokenizer.pad_token_id
    return int(pid if pid is not None else (tokenizer.eos_token_id or 0))


def formatted_prompts(tokenizer: Any, texts: list[str], system: str | None = None) -> list[str]:
    return [format_prompt(tokenizer, t, system) for t in texts]


def encode_prompts(
    tokenizer: Any, texts: list[str], max_length: int = 256, system: str | None = None
) -> dict[str, torch.Tensor]:
    """{input_ids, attention_mask} right-padded; prompts over ``max_length`` are truncated with a warning."""
    ids = [
        tokenizer(t, add_special_tokens=False)["input_ids"]
        for t in formatted_prompts(tokenizer, texts, system)
    ]
    warn_truncated(sum(len(i) > max_length for i in ids), max_length)
    ids = [i[:max_length] for i in ids]
    T = max(len(i) for i in ids)
    out = torch.full((len(ids), T), _pad_id(tokenizer))
    mask = torch.zeros((len(ids), T), dtype=torch.long)
    for r, i in enumerate(ids):
        out[r, : len(i)] = torch.tensor(i)
        mask[r, : len(i)] = 1
    return {"input_ids": out, "attention_mask": mask}


def encode_pairs(
    tokenizer: Any, rows: list[dict[str, str]], max_length: int = 512, system: str | None = None
) -> dict[str, torch.Tensor]:
    """{input_ids, attention_mask, labels}: prompt (chat-formatted, with the row's ``system`` or ``system``)
    + response + EOS, loss on the answer only."""
    eos = tokenizer.eos_token_id
    seqs, n_long = [], 0
    for row in rows:
        text = format_prompt(tokenizer, row["prompt"], row.get("system") or system)
        p = tokenizer(text, add_special_tokens=False)["input_ids"]
        a = tokenizer(row["response"], add_special_tokens=False)["input_ids"] + (
            [eos] if eos is not None else []
        )
        n_long += len(p) + len(a) > max_length
        seqs.append((p, a))
    warn_truncated(n_long, max_length)
    T = min(max_length, max(len(p) + len(a) for p, a in seqs))
    ids = torch.full((len(seqs), T), _pad_id(tokenizer))
    labels = torch.full((len(seqs), T), -100)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for r, (p, a) in enumerate(seqs):
        full = (p + a)[:T]
        ids[r, : len(full)] = torch.tensor(full)
        mask[r, : len(full)] = 1
        labels[r, len(p) : len(full)] = torch.tensor(full[len(p) :], dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
