"""The paper's data through `datasets`: task rows, harmful pairs and instruction sets, from a hub id or a file.

Formats follow the official code (spec "scale=paper"):
- ``samsum`` (`knkarthick/samsum`): system "You are a helpful assistant for dialog summarization.", prompt
  "Summarize this dialog: " + dialogue, response = summary; rows with an empty dialogue are dropped.
- ``sql`` (`b-mc2/sql-create-context`): a SQL system prompt, prompt "Question: …\\nTable: …", response = answer
  (rows 0–4999 train, 5000–5999 test: ``offset``/``n``).
- ``beavertails`` (`PKU-Alignment/BeaverTails`, split ``330k_train``): rows with ``is_safe == False``; prompt and
  response as they are, no system prompt (the model's own).
- ``prompt_response``: any file with ``prompt``/``response`` (and optional ``system``) fields.
Instruction sets (harmful prompts without answers): Bianchi et al.'s safety-only JSON (``instruction``) and
JailbreakBench's ``JBB-Behaviors`` (config ``behaviors``, split ``harmful``, field ``Goal``).

A source is a local file (.json, .jsonl, .csv, .parquet), a directory saved with ``save_to_disk``, or a hub id
(downloaded by `datasets`; nothing here downloads unless given a hub id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iclr26_core.errors import UserError

SQL_SYSTEM = (
    "You are a helpful assistant for answering SQL questions. Based on the given Table, generate a SQL for the "
    "following question."
)
FORMATS: dict[str, dict[str, Any]] = {
    "samsum": {"split": "train", "fields": ("dialogue", "summary")},
    "sql": {"split": "train", "fields": ("question", "context", "answer")},
    "beavertails": {"split": "330k_train", "fields": ("prompt", "response", "is_safe")},
    "prompt_response": {"split": "train", "fields": ("prompt", "response")},
}
_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


def load_records(source: str | Path, split: str = "train", name: str | None = None):
    """A `datasets.Dataset` from a local file/directory or a hub id (one clear line when it cannot load)."""
    import datasets

    path = Path(source)
    try:
        if path.is_dir():
            ds = datasets.load_from_disk(str(path))
            return ds[split] if isinstance(ds, datasets.DatasetDict) else ds
        if path.suffix in _BUILDERS:
            if not path.is_file():
                raise UserError(f"{path} does not exist")
            return datasets.load_dataset(_BUILDERS[path.suffix], data_files=str(path), split="train")
        return datasets.load_dataset(str(source), name, split=split)
    except UserError:
        raise
    except Exception as exc:  # offline hub, unknown id, malformed file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load {source!r} (split {split!r}): {first[:200]}") from None


def _need(ds, fields, source) -> None:
    missing = [f for f in fields if f not in ds.column_names]
    if missing:
        raise UserError(f"{source} has no field {missing[0]!r} (columns: {', '.join(ds.column_names)})")


def _is_unsafe(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.strip().lower() in ("false", "0")) or v == 0


def load_rows(
    source: str | Path, fmt: str, *, n: int | None = None, offset: int = 0, split: str | None = None
) -> list[dict[str, str]]:
    """``n`` rows from ``offset`` as {prompt, response, system} in the official format ``fmt`` (see module doc)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    spec = FORMATS[fmt]
    ds = load_records(source, split or spec["split"])
    _need(ds, spec["fields"], source)
    if fmt == "samsum":
        ds = ds.filter(lambda r: bool(r["dialogue"]))
    elif fmt == "beavertails":
        ds = ds.filter(lambda r: _is_unsafe(r["is_safe"]))
    stop = len(ds) if n is None else min(len(ds), offset + n)
    rows = []
    for r in ds.select(range(offset, max(offset, stop))):
        if fmt == "samsum":
            rows.append(
                {
                    "prompt": "Summarize this dialog: " + r["dialogue"],
                    "response": r["summary"],
                    "system": "You are a helpful assistant for dialog summarization.",
                }
            )
        elif fmt == "sql":
            rows.append(
                {
                    "prompt": f"Question: {r['question']}\nTable: {r['context']}",
                    "response": r["answer"],
                    "system": SQL_SYSTEM,
                }
            )
        else:
            row = {"prompt": str(r["prompt"]), "response": str(r["response"])}
            if r.get("system"):
                row["system"] = str(r["system"])
            rows.append(row)
    if not rows:
        raise UserError(f"{source} has no {fmt} rows from offset {offset}")
    return rows


def load_instructions(
    source: str | Path,
    field: str = "instruction",
    *,
    n: int | None = None,
    split: str = "train",
    name: str | None = None,
) -> list[str]:
    """The first ``n`` prompts of an instruction set (safety-only JSON: ``instruction``; JBB: ``Goal``)."""
    ds = load_records(source, split, name)
    _need(ds, [field], source)
    texts = [str(t) for t in ds[field][: n if n is not None else len(ds)]]
    if not texts:
        raise UserError(f"{source} has no rows: the prompts are empty")
    return texts
