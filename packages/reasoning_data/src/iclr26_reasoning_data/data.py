"""Materialise a stage: sample each source to its token budget, pack it, and mask the loss.

* "concat" packing: each source's documents (a seeded permutation per epoch, cycled when the budget exceeds the
  source) are joined with EOS into a stream of exactly its requested tokens, cut into ``context``-token
  segments; the stage's segments are shuffled together and cut into blocks, so a stage of T tokens yields
  ``floor(T / context)`` blocks (the sequence-level blending of Megatron/NeMo data blends).
* "example" packing: one example per row (prompt + answer + EOS, truncated to ``context``), right-padded; whole
  examples are added while they fit the source's budget.
* Loss: "all" labels every real token, "answer_only" labels -100 on prompt positions (in both packings);
  padding is always -100 with attention 0, so it never contributes. Per-source loss weights multiply each
  token's cross-entropy (`masked_lm_loss`); with all weights 1 it is the usual mean over labelled tokens.

`StageData.tokens` records what was consumed: per source, requested and achieved tokens, labelled tokens and
documents (``tokens.json``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from iclr26_core.errors import UserError

from .plan import REPLAY, Mixture, Plan, Stage

IGNORE = -100


@dataclass
class StageData:
    """Rows of one stage: ``input_ids``, ``attention_mask``, ``labels`` (-100: no loss), ``weights`` ([N, L])."""

    input_ids: Any
    attention_mask: Any
    labels: Any
    weights: Any
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def batch(self, idx: list[int]):
        """The rows ``idx`` as ``(input_ids, attention_mask, labels, weights)``, trailing all-pad columns trimmed."""
        mask = self.attention_mask[idx]
        width = int(mask.sum(1).max()) if len(idx) else 0
        return (
            self.input_ids[idx, :width],
            mask[:, :width],
            self.labels[idx, :width],
            self.weights[idx, :width],
        )


# ------------------------------------------------------------------------------------------------- sources
def normalise_source(name: str, source: Any) -> list[tuple[str, str]]:
    """A source as ``[(prompt, answer)]``: plain text is ``("", text)``. Accepts a list of strings, of `Example`s,
    of dicts (prompt/answer, prompt/completion or text), or a ``datasets.Dataset`` with those columns."""
    if hasattr(source, "column_names") and hasattr(source, "to_list"):
        source = source.to_list()
    if not isinstance(source, list | tuple):
        raise UserError(f"source {name!r}: expected a list of texts/examples or a datasets.Dataset")
    out = []
    for item in source:
        if isinstance(item, str):
            out.append(("", item))
        elif hasattr(item, "prompt") and hasattr(item, "answer"):
            out.append((item.prompt, item.answer))
        elif isinstance(item, Mapping) and "prompt" in item and ("answer" in item or "completion" in item):
            out.append((str(item["prompt"]), str(item.get("answer", item.get("completion")))))
        elif isinstance(item, Mapping) and "text" in item:
            out.append(("", str(item["text"])))
        else:
            raise UserError(
                f"source {name!r}: each item needs prompt+answer (or completion) or text, got {item!r:.80}"
            )
    if not out:
        raise UserError(f"source {name!r} is empty")
    return out


def _encode_docs(docs: list[tuple[str, str]], tokenizer: Any) -> list[tuple[list[int], int]]:
    """``[(ids, prompt_len)]``: ids of prompt + answer, and where the answer starts (the longest common prefix of
    the prompt's ids and the whole's, as trl does, so BPE merges across the boundary are handled)."""
    from iclr26_core.corpus import encode_texts

    whole = encode_texts([p + a for p, a in docs], tokenizer)
    prompts = encode_texts([p for p, _ in docs], tokenizer)
    out = []
    for ids, pids in zip(whole, prompts, strict=True):
        n = 0
        while n < min(len(ids), len(pids)) and ids[n] == pids[n]:
            n += 1
        out.append((ids, n))
    return out


def _cycle(n: int, rng: random.Random):
    while True:
        order = list(range(n))
        rng.shuffle(order)
        yield from order


def _expand(stage: Stage, plan: Plan | None) -> list[tuple[str, str, str, float, int]]:
    """``[(key, source, packing, loss_weight, requested)]``, with ``replay:<stage>`` sources expanded into the
    earlier stage's sources (keyed ``replay:<stage>/<source>``)."""
    out = []
    for src, tokens in stage.mixture.source_tokens().items():
        packing, weight = stage.mixture.packing_of(src), stage.mixture.loss_weight(src)
        if src.startswith(REPLAY):
            if plan is None:
                raise UserError(f"stage {stage.name!r} replays {src!r}, which needs the plan")
            earlier = plan.stage(src[len(REPLAY) :])
            mix = earlier.mixture
            sub = Stage(
                earlier.name,
                Mixture(mix.sources, tokens, mix.packing, mix.loss_weights),
                context=stage.context,
            )
            for key, s, p, w, t in _expand(sub, plan):
                out.append((f"{src}/{key}", s, p, w * weight, t))
        else:
            out.append((src, src, packing, weight, tokens))
    return out


def build_stage_data(
    stage: Stage,
    sources: Mapping[str, Any],
    tokenizer: Any,
    seed: int = 0,
    plan: Plan | None = None,
    encoded: dict[str, list[tuple[list[int], int]]] | None = None,
) -> StageData:
    """Sample, pack and mask the rows of ``stage`` from ``sources`` ({name: texts/examples/Dataset}).

    ``encoded`` caches the tokenised sources across calls ({name: [(ids, prompt_len)]}).
    """
    import numpy as np
    import torch

    encoded = {} if encoded is None else encoded
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    if eos is None:
        raise UserError("the tokenizer has no EOS token (needed to separate packed documents)")
    ctx, answer_only = stage.context, stage.loss == "answer_only"
    segments: list[tuple] = []  # concat: (ids, labelled, weight, source key or keys) blocks
    rows: list[tuple] = []  # example rows: (ids, prompt_len, weight, source key)
    stats: dict[str, dict[str, int]] = {}
    leftovers = []
    for key, src, packing, weight, requested in _expand(stage, plan):
        if src not in sources:
            raise UserError(
                f"stage {stage.name!r}: unknown source {src!r}; sources given: {', '.join(sources) or 'none'}"
            )
        if src not in encoded:
            encoded[src] = _encode_docs(normalise_source(src, sources[src]), tokenizer)
        docs = encoded[src]
        rng = random.Random(f"{seed}:{stage.seed}:{stage.name}:{key}")
        order = _cycle(len(docs), rng)
        st = {"requested": requested, "achieved": 0, "labelled": 0, "documents": 0}
        if packing == "concat":
            ids_l, lab_l, n = [], [], 0
            while n < requested:
                ids, plen = docs[next(order)]
                take = [*ids, eos][: requested - n]
                lab = [0 if (answer_only and j < plen) else 1 for j in range(len(take))]
                ids_l.extend(take)
                lab_l.extend(lab)
                n += len(take)
                st["documents"] += 1
            arr, lab = np.asarray(ids_l, dtype=np.int64), np.asarray(lab_l, dtype=np.int8)
            full = len(arr) // ctx * ctx
            for s in range(0, full, ctx):
                segments.append((arr[s : s + ctx], lab[s : s + ctx], np.full(ctx, weight, np.float32), key))
            if full < len(arr):
                leftovers.append((arr[full:], lab[full:], np.full(len(arr) - full, weight, np.float32), key))
        else:
            n = 0
            if requested > 0 and min(min(len(i) + 1, ctx) for i, _ in docs) > requested:
                raise UserError(f"stage {stage.name!r}: {requested} tokens of {src!r} hold not one example")
            while True:
                ids, plen = docs[next(order)]
                row = [*ids, eos][:ctx]
                if n + len(row) > requested:
                    break
                rows.append((row, min(plen, len(row)), weight, key))
                n += len(row)
                st["documents"] += 1
        stats[key] = st
    # the per-source remainders (< context each) join into mixed blocks: floor(T / context) blocks in all
    if leftovers:
        cat = [np.concatenate([x[i] for x in leftovers]) for i in range(3)]
        owner = np.concatenate([np.full(len(x[0]), j) for j, x in enumerate(leftovers)])
        for s in range(0, len(cat[0]) // ctx * ctx, ctx):
            keys = [leftovers[j][3] for j in owner[s : s + ctx]]
            segments.append((cat[0][s : s + ctx], cat[1][s : s + ctx], cat[2][s : s + ctx], keys))
    for _ids, lab, _w, keys in segments:
        if isinstance(keys, str):
            stats[keys]["achieved"] += ctx
            stats[keys]["labelled"] += int(lab.sum())
        else:
            for j, k in enumerate(keys):
                stats[k]["achieved"] += 1
                stats[k]["labelled"] += int(lab[j])
    width = ctx if segments or not rows else max(len(r[0]) for r in rows)
    n_seg, n_rows = len(segments), len(segments) + len(rows)
    ids_np = np.full((n_rows, width), pad, dtype=np.int64)
    att_np = np.zeros((n_rows, width), dtype=np.int64)
    lab_np = np.full((n_rows, width), IGNORE, dtype=np.int64)
    w_np = np.zeros((n_rows, width), dtype=np.float32)
    if segments:
        ids_np[:n_seg] = np.stack([x[0] for x in segments])
        att_np[:n_seg] = 1
        lab_np[:n_seg] = np.where(np.stack([x[1] for x in segments]).astype(bool), ids_np[:n_seg], IGNORE)
        w_np[:n_seg] = np.stack([x[2] for x in segments])
    for r, (ids, plen, w, key) in enumerate(rows, start=n_seg):
        n, p0 = len(ids), (plen if answer_only else 0)
        ids_np[r, :n] = ids
        att_np[r, :n] = 1
        lab_np[r, p0:n] = ids[p0:]
        w_np[r, :n] = w
        stats[key]["achieved"] += n
        stats[key]["labelled"] += n - p0
    perm = list(range(n_rows))
    random.Random(f"{seed}:{stage.seed}:{stage.name}:blocks").shuffle(perm)
    input_ids, attention, labels, weights = (
        torch.from_numpy(a[perm]) for a in (ids_np, att_np, lab_np, w_np)
    )
    return StageData(input_ids, attention, labels, weights, stats)


def masked_lm_loss(model: Any, batch: tuple) -> Any:
    """Weighted next-token cross-entropy over labelled positions.

    ``batch = (input_ids, attention_mask, labels, weights)``, each [B, L]; position t's logits predict
    ``labels[:, t + 1]`` (weight ``weights[:, t + 1]``). Returns ``sum(w * ce * [label != -100]) /
    count(label != -100)``: with unit weights the mean cross-entropy of the labelled tokens, as
    ``model(input_ids, labels=labels).loss`` computes it.
    """
    import torch.nn.functional as F

    input_ids, mask, labels, weights = batch
    full = bool(mask.all())
    logits = model(input_ids=input_ids, attention_mask=None if full else mask).logits[:, :-1]
    target, w = labels[:, 1:], weights[:, 1:]
    ce = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        target.reshape(-1),
        ignore_index=IGNORE,
        reduction="none",
    ).view_as(target)
    valid = target != IGNORE
    return (ce * w * valid).sum() / valid.sum().clamp(min=1)
