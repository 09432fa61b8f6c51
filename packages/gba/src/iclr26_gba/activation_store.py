"""Activations on disk: safetensors shards written while the model runs, read back one window at a time.

    <dir>/index.json                 {"format", "d", "rows", "dtype", "shards": [{"file", "rows"}], "meta"}
    <dir>/acts-00000.safetensors     {"acts": [rows_i, d]}   (one file per ``shard_rows`` rows)

Memory does not grow with the number of tokens: writing holds at most one shard (``shard_rows`` × d),
training holds one window (``window_rows`` × d, read with safetensors' lazy slices) plus a batch. For the
paper's runs (d = 2304, 100M+ tokens) the defaults keep ≈ 600 MB per shard file and ≈ 75 MB in memory.
Batches: every pass over the rows visits the windows in a new random order and the rows of a window in a
random order (rows of one window come from neighbouring sequences; that is the price of bounded memory).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from .errors import GBAError
from .seeding import generator

INDEX = "index.json"
FORMAT = "iclr26-gba-activations/1"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class ActivationShardWriter:
    """Append [N, d] activation rows; every ``shard_rows`` rows become one safetensors file (atomic)."""

    def __init__(
        self, directory: str | Path, d: int, shard_rows: int = 65536, dtype: str = "float32"
    ) -> None:
        if dtype not in DTYPES:
            raise GBAError(f"unknown activation dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
        if int(shard_rows) < 1:
            raise GBAError(f"shard_rows must be >= 1, got {shard_rows}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        if (self.directory / INDEX).exists():
            raise GBAError(f"{str(self.directory)!r} already holds activations; choose a new directory")
        self.d, self.shard_rows, self.dtype = int(d), int(shard_rows), dtype
        self._pending: list[torch.Tensor] = []
        self._pending_rows = 0
        self.shards: list[dict[str, Any]] = []
        self.rows = 0

    def add(self, acts: torch.Tensor) -> None:
        if acts.ndim != 2 or acts.shape[1] != self.d:
            raise GBAError(f"activations have shape {tuple(acts.shape)}, expected [N, {self.d}]")
        if not bool(torch.isfinite(acts).all()):
            raise GBAError("the model's activations contain NaN or infinite values")
        self._pending.append(acts.detach().to("cpu", DTYPES[self.dtype]))
        self._pending_rows += acts.shape[0]
        while self._pending_rows >= self.shard_rows:
            block = torch.cat(self._pending)
            self._write(block[: self.shard_rows])
            rest = block[self.shard_rows :]
            self._pending, self._pending_rows = ([rest] if rest.shape[0] else []), rest.shape[0]

    def _write(self, block: torch.Tensor) -> None:
        from safetensors.torch import save_file

        name = f"acts-{len(self.shards):05d}.safetensors"
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=self.directory)
        os.close(fd)
        try:
            save_file({"acts": block.contiguous()}, tmp)
            os.replace(tmp, self.directory / name)
        finally:
            Path(tmp).unlink(missing_ok=True)
        self.shards.append({"file": name, "rows": int(block.shape[0])})
        self.rows += int(block.shape[0])

    def close(self, meta: dict[str, Any] | None = None) -> ActivationStore:
        """Write the last (partial) shard and ``index.json``; returns the store for reading."""
        from iclr26_core.fs import write_json

        if self._pending_rows:
            self._write(torch.cat(self._pending))
            self._pending, self._pending_rows = [], 0
        if self.rows == 0:
            raise GBAError("no activation rows were collected")
        write_json(
            self.directory / INDEX,
            {
                "format": FORMAT,
                "d": self.d,
                "rows": self.rows,
                "dtype": self.dtype,
                "shards": self.shards,
                "meta": meta or {},
            },
        )
        return ActivationStore(self.directory)


class ActivationStore:
    """Rows [start, stop) of an activation directory written by `ActivationShardWriter`.

    ``head(n)`` / ``read(a, b)`` give rows as a float32 tensor; ``batches(batch_size, seed)`` an endless
    iterator of shuffled [batch_size, d] batches (pass the store itself to `train_sae`).
    """

    def __init__(
        self, directory: str | Path, start: int = 0, stop: int | None = None, window_rows: int = 8192
    ) -> None:
        self.directory = Path(directory)
        try:
            index = json.loads((self.directory / INDEX).read_text())
        except FileNotFoundError:
            raise GBAError(f"{str(self.directory)!r} holds no activations (no {INDEX})") from None
        except json.JSONDecodeError as exc:
            raise GBAError(f"{str(self.directory / INDEX)!r} is corrupt ({exc.msg})") from None
        if index.get("format") != FORMAT:
            raise GBAError(f"{str(self.directory)!r} is not an iclr26-gba activation directory")
        self.index = index
        self.d, self.total_rows = int(index["d"]), int(index["rows"])
        self.meta: dict[str, Any] = index.get("meta", {})
        offsets = [0]
        for s in index["shards"]:
            if not (self.directory / s["file"]).is_file():
                raise GBAError(f"activation shard {s['file']!r} is missing from {str(self.directory)!r}")
            offsets.append(offsets[-1] + int(s["rows"]))
        self._offsets = offsets
        self.start = int(start)
        self.stop = self.total_rows if stop is None else int(stop)
        if not 0 <= self.start < self.stop <= self.total_rows:
            raise GBAError(f"row range [{start}, {stop}) is outside the {self.total_rows} stored rows")
        self.window_rows = int(window_rows)

    @property
    def rows(self) -> int:
        return self.stop - self.start

    def __len__(self) -> int:
        return self.rows

    def view(self, start: int = 0, stop: int | None = None) -> ActivationStore:
        """Rows [start, stop) of this view (e.g. a held-out tail)."""
        stop = self.rows if stop is None else stop
        return ActivationStore(self.directory, self.start + start, self.start + stop, self.window_rows)

    def read(self, a: int, b: int) -> torch.Tensor:
        """Rows [a, b) of this view as float32 [b − a, d]; only the needed slices of the shards are read."""
        from safetensors import safe_open

        a, b = self.start + int(a), self.start + int(b)
        parts = []
        for i, s in enumerate(self.index["shards"]):
            lo, hi = self._offsets[i], self._offsets[i + 1]
            if hi <= a or lo >= b:
                continue
            with safe_open(str(self.directory / s["file"]), framework="pt") as f:
                parts.append(f.get_slice("acts")[max(a, lo) - lo : min(b, hi) - lo].float())
        if not parts:
            return torch.empty(0, self.d)
        return torch.cat(parts)

    def head(self, n: int) -> torch.Tensor:
        return self.read(0, min(int(n), self.rows))

    def chunks(self, rows: int | None = None) -> Iterator[torch.Tensor]:
        """The rows in order, ``rows`` (default ``window_rows``) at a time."""
        step = int(rows or self.window_rows)
        for a in range(0, self.rows, step):
            yield self.read(a, min(a + step, self.rows))

    def batches(self, batch_size: int, seed: int = 0) -> Iterator[torch.Tensor]:
        """Endless shuffled batches: windows in a random order per pass, rows shuffled inside a window."""
        g = generator(int(seed), "activation-windows")
        starts = list(range(0, self.rows, self.window_rows))
        carry = torch.empty(0, self.d)
        while True:
            for w in torch.randperm(len(starts), generator=g).tolist():
                a = starts[w]
                x = self.read(a, min(a + self.window_rows, self.rows))
                x = torch.cat([carry, x[torch.randperm(x.shape[0], generator=g)]])
                n_full = x.shape[0] // batch_size
                for i in range(n_full):
                    yield x[i * batch_size : (i + 1) * batch_size]
                carry = x[n_full * batch_size :]


def write_activations(
    model,
    blocks: Iterable[torch.Tensor],
    layer: int,
    directory: str | Path,
    max_tokens: int,
    *,
    shard_rows: int = 65536,
    dtype: str = "float32",
    meta: dict[str, Any] | None = None,
    progress: Callable | None = None,
) -> ActivationStore:
    """Run ``model`` on [B, T] token blocks and stream layer ``layer``'s activations into shards.

    Stops after ``max_tokens`` rows. Nothing but the current batch and one shard is held in memory.
    """
    from .activations import collect_activations

    writer: ActivationShardWriter | None = None
    rows = 0
    bar = progress(total=int(max_tokens), desc="activations") if progress is not None else None
    try:
        for ids in blocks:
            acts = collect_activations(model, ids, layer, max_tokens=int(max_tokens) - rows)
            if writer is None:
                writer = ActivationShardWriter(directory, acts.shape[1], shard_rows, dtype)
            writer.add(acts)
            rows += acts.shape[0]
            if bar is not None:
                bar.update(acts.shape[0])
            if rows >= max_tokens:
                break
    finally:
        if bar is not None:
            bar.close()
    if writer is None:
        raise GBAError("no tokens to collect activations from")
    return writer.close({**(meta or {}), "layer": int(layer), "tokens": rows})
