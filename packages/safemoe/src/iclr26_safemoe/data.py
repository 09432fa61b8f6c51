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


def read_jsonl(path: str | Path, fields: list[str], n: int | None = None) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist")
    rows = []
    for k, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise UserError(f"{path}:{k} is not valid JSON") from None
        missing = [f for f in fields if not isinstance(row, dict) or f not in row]
        if missing:
            raise UserError(f"{path}:{k} has no field {missing[0]!r}")
        rows.append({f: str(row[f]) for f in fields})
        if n is not None and len(rows) >= n:
            break
    if not rows:
        raise UserError(f"{path} has no rows: the prompts are empty")
    return rows


def format_prompt(tokenizer: Any, text: str) -> str:
    """The chat template with the generation prompt when the tokenizer has one; else the text itself."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )
    return text


def _pad_id(tokenizer: Any) -> int:
    pid = tokenizer.pad_token_id
    return int(pid if pid is not None else (tokenizer.eos_token_id or 0))


def encode_prompts(tokenizer: Any, texts: list[str], max_length: int = 256) -> dict[str, torch.Tensor]:
    """{input_ids, attention_mask} right-padded; prompts over ``max_length`` are truncated with a warning."""
    ids = [tokenizer(format_prompt(tokenizer, t), add_special_tokens=False)["input_ids"] for t in texts]
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
    tokenizer: Any, rows: list[dict[str, str]], max_length: int = 512
) -> dict[str, torch.Tensor]:
    """{input_ids, attention_mask, labels}: prompt (chat-formatted) + response + EOS, loss on the answer only."""
    eos = tokenizer.eos_token_id
    seqs, n_long = [], 0
    for row in rows:
        p = tokenizer(format_prompt(tokenizer, row["prompt"]), add_special_tokens=False)["input_ids"]
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
