"""Exact-match evaluation with answer extraction, and the paper's gain arithmetic.

``acc(arm)`` is the mean over task families of the exact-match accuracy of the final answer, generated greedily
from the prompt (left-padded batches, stopping at the end of the answer line).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

_FINAL = re.compile(r"(?:^|\s)=\s*([^\s;,]+)")
_ANSWER = re.compile(r"Answer\s*:\s*([^\n]+)", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?[\d,]*\.?\d+")


def extract_answer(text: str) -> str | None:
    """The final answer of a generation: the last `` =X`` marker on the first line (our traces: ``"b=7;c=9 =9"``
    -> ``"9"``; ``"=7\\n"`` -> ``"7"``), else the text after the last ``Answer:`` (real data: ``"Answer: 1,234."``
    -> ``"1234"``); ``None`` when neither marker is there."""
    first = text.split("\n", 1)[0]
    found = _FINAL.findall(first)
    if found:
        return found[-1]
    found = _ANSWER.findall(text)
    if not found:
        return None
    ans = found[-1].strip().rstrip(".").strip()
    if _NUMBER.fullmatch(ans):
        ans = ans.replace(",", "")
    return ans or None


def _field(ex: Any, name: str, default: Any = None) -> Any:
    return ex.get(name, default) if isinstance(ex, dict) else getattr(ex, name, default)


def _stop_ids(tokenizer: Any) -> list[int]:
    from iclr26_core.corpus import encode_texts

    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    nl = encode_texts(["\n"], tokenizer)[0]
    if len(nl) == 1:
        ids.append(nl[0])
    return ids


def generate(
    model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int = 24, batch_size: int = 256
) -> list[str]:
    """Greedy continuations of ``prompts`` (left-padded batches; a row stops at EOS or a newline)."""
    import torch

    from iclr26_core.corpus import encode_texts

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    stop = _stop_ids(tokenizer)
    device = next(model.parameters()).device
    encoded = encode_texts(list(prompts), tokenizer)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths share a batch
    out: list[str] = [""] * len(encoded)
    was = model.training
    model.eval()
    with torch.no_grad():
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                n = len(encoded[i])
                ids[r, width - n :] = torch.tensor(encoded[i])
                mask[r, width - n :] = 1
            gen = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=stop or None,
                pad_token_id=pad,
            )
            texts = tokenizer.batch_decode(gen[:, width:].tolist(), skip_special_tokens=True)
            for r, i in enumerate(idx):
                out[i] = texts[r]
    model.train(was)
    return out


def exact_match(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Any],
    max_new_tokens: int = 24,
    extractor: Callable[[str], str | None] | None = None,
    batch_size: int = 256,
    majority: dict[Any, str] | None = None,
) -> dict[str, Any]:
    """Exact match of the extracted final answer against ``example.final`` (or the answer's own final).

    Returns ``{"mean": mean over families, "overall": over examples, "per_family": {family: acc}, "n": N}``.
    Examples are `Example`s or dicts with ``prompt`` and ``final`` (or ``answer``), optionally ``family``.
    With ``majority`` ({family: the family's most frequent answer}), also ``"non_majority"``: the same mean over
    only the problems whose answer is not their family's majority answer (what an answer prior cannot score).
    """
    extractor = extractor or extract_answer
    prompts = [_field(e, "prompt") for e in examples]
    if any(p is None for p in prompts):
        from iclr26_core.errors import UserError

        raise UserError("every evaluation example needs a prompt")
    gens = generate(model, tokenizer, prompts, max_new_tokens, batch_size)
    hits: dict[Any, list[bool]] = defaultdict(list)
    rare: dict[Any, list[bool]] = defaultdict(list)
    for ex, text in zip(examples, gens, strict=True):
        gold = _field(ex, "final")
        if gold is None:
            gold = extractor(str(_field(ex, "answer", "")))
        pred = extractor(text)
        fam = _field(ex, "family", "all")
        hit = pred is not None and str(pred) == str(gold)
        hits[fam].append(hit)
        if majority is not None and str(gold) != str(majority.get(fam)):
            rare[fam].append(hit)
    per = _per_family(hits)
    n = sum(len(v) for v in hits.values())
    out = {
        "mean": sum(per.values()) / len(per) if per else 0.0,
        "overall": sum(sum(v) for v in hits.values()) / n if n else 0.0,
        "per_family": per,
        "n": n,
    }
    if majority is not None:
        per_rare = _per_family(rare)
        out["non_majority"] = sum(per_rare.values()) / len(per_rare) if per_rare else 0.0
        out["non_majority_per_family"] = per_rare
    return out


def _per_family(hits: dict[Any, list[bool]]) -> dict[Any, float]:
    return {k: sum(v) / len(v) for k, v in sorted(hits.items(), key=lambda kv: str(kv[0])) if v}


def gains(acc_a: float, acc_b: float) -> dict[str, float | None]:
    """``{"abs": acc_a - acc_b, "rel": (acc_a - acc_b) / acc_b}`` (``rel`` is None when ``acc_b`` is 0).

    The paper does not say whether its +19 % / +11 % / +15 % are absolute or relative, so both are reported.
    """
    diff = float(acc_a) - float(acc_b)
    return {"abs": diff, "rel": diff / float(acc_b) if acc_b else None}
