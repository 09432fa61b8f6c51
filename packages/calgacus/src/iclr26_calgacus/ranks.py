"""The two primitives of Calgacus: token ranks under a causal LM, and tokens from ranks.

For a context c with next-token scores ``logit_c`` (a 1-D tensor ``[V]``) and the admissible alphabet
``A`` (a boolean mask ``[V]``: special tokens excluded),

    rank_c(v) = 1 + #{u ∈ A : logit_c(u) > logit_c(v)} + #{u ∈ A : logit_c(u) = logit_c(v), u < v}

i.e. the 1-based position of ``v`` in a *stable* sort of ``−logit_c`` over ``A`` (ties broken by token id
ascending), and ``tok_c(r)`` is the admissible token at position ``r`` of that order, so
``tok_c(rank_c(v)) = v`` for every admissible ``v``.

An optional ``accept(v) -> bool`` filter (the ``admissible="canonical"`` rule of the paper package) shrinks
the alphabet at one step further; ranks then count only accepted candidates. It is evaluated lazily,
in rank order, so it costs a call per candidate *above* the chosen one only.

`token_ranks` and `tokens_from_ranks` run one `RankLM` session each: one token per step, the same
incremental code path on both sides (see ``hf.py`` for the transformers adapter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from iclr26_core.errors import UserError


class CalgacusError(UserError):
    """A protocol-level failure the user can act on (rank out of range, inadmissible token, too long ...)."""


class Session(Protocol):
    """An incremental decoding state: ``logits()`` scores the next token, ``append(id)`` consumes one."""

    steps: int

    def logits(self) -> Any:  # torch.Tensor [V]
        ...

    def append(self, token_id: int) -> None: ...


@runtime_checkable
class RankLM(Protocol):
    """What Calgacus needs from a language model (``HFRankLM``, ``CharNGramLM`` or your own adapter).

    * ``session(context_ids)`` → a `Session` that has consumed ``context_ids`` (non-empty) one token per step;
    * ``admissible_mask()`` → bool tensor ``[V]``: the alphabet A (no special / added tokens);
    * ``encode_text(str) -> list[int]`` / ``decode_ids(ids) -> str`` (no special tokens added);
    * ``start_ids``: the context used for an empty prompt (BOS, else a newline token);
    * ``max_positions``: the context limit (``None``: unlimited);
    * ``bijective``: whether ``encode_text(decode_ids(ids)) == ids`` always holds (char vocabularies);
    * ``logprobs(context_ids, target_ids) -> list[float]``: log p(target_i | context, target_<i), nats;
    * ``special_ids``: ids that must never appear in a text.
    """

    name: str
    start_ids: list[int]
    max_positions: int | None
    bijective: bool
    special_ids: set[int]

    def session(self, context_ids: Sequence[int]) -> Session: ...

    def admissible_mask(self) -> Any: ...

    def encode_text(self, text: str) -> list[int]: ...

    def decode_ids(self, ids: Sequence[int]) -> str: ...

    def logprobs(self, context_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]: ...


Accept = Callable[[int], bool]


def _order(logits: Any, mask: Any) -> Any:
    """Admissible ids sorted by decreasing logit, ties by increasing id (a stable sort of −logits)."""
    import torch

    ids = torch.nonzero(mask, as_tuple=False).flatten()
    order = torch.argsort(-logits[ids], stable=True)
    return ids[order]


def rank_of(logits: Any, token: int, mask: Any, accept: Accept | None = None) -> int:
    """``rank_c(token)`` (1-based) among admissible (and accepted) tokens; logits ``[V]``, mask ``[V]`` bool.

    Raises `CalgacusError` if ``token`` is not admissible.
    """
    import torch

    if not 0 <= token < logits.shape[0] or not bool(mask[token]):
        raise CalgacusError(f"token id {token} is not in the admissible alphabet")
    if accept is None:
        lv = logits[token]
        ids = torch.arange(logits.shape[0], device=logits.device)
        before = mask & ((logits > lv) | ((logits == lv) & (ids < token)))
        return 1 + int(before.sum())
    if not accept(token):
        raise CalgacusError(f"token id {token} is rejected by the admissibility filter")
    rank = 0
    for v in _order(logits, mask).tolist():
        if v == token:
            return rank + 1
        if accept(v):
            rank += 1
    raise AssertionError("unreachable: an admissible token is in the order")


def token_at_rank(logits: Any, rank: int, mask: Any, accept: Accept | None = None) -> int:
    """``tok_c(rank)``: the admissible (and accepted) token at 1-based position ``rank``."""
    if rank < 1:
        raise CalgacusError(f"rank {rank} is not a positive integer")
    order = _order(logits, mask)
    if accept is None:
        if rank > order.numel():
            raise CalgacusError(f"rank {rank} exceeds the admissible alphabet ({order.numel()} tokens)")
        return int(order[rank - 1])
    seen = 0
    for v in order.tolist():
        if accept(v):
            seen += 1
            if seen == rank:
                return v
    raise CalgacusError(f"rank {rank} exceeds the filtered admissible alphabet ({seen} tokens) at this step")


def _check_logits(logits: Any, step: int) -> None:
    import torch

    if not bool(torch.isfinite(logits).any()) or bool(torch.isnan(logits).any()):
        raise CalgacusError(f"the model returned NaN/inf logits at step {step}")


def context_or_start(lm: RankLM, context_ids: Sequence[int]) -> list[int]:
    """The context ids, or the model's start ids (BOS, else a newline token) when empty."""
    ids = list(context_ids)
    return ids if ids else list(lm.start_ids)


def token_ranks(
    lm: RankLM,
    context_ids: Sequence[int],
    target_ids: Sequence[int],
    accept: Callable[[list[int], int], bool] | None = None,
    logprobs: list[float] | None = None,
) -> list[int]:
    """``r_i = rank_{c + x_<i}(x_i)`` for i = 1..n with one incremental session (n − 1 steps after c).

    ``accept(prefix, v)``: optional filter on candidate ``v`` after ``prefix = x_<i``. When ``logprobs`` is a
    list, the full-vocabulary log-probability of each ``x_i`` is appended to it.
    """
    targets = [int(t) for t in target_ids]
    if not targets:
        return []
    mask = lm.admissible_mask()
    sess = lm.session(context_or_start(lm, context_ids))
    ranks: list[int] = []
    for i, x in enumerate(targets):
        logits = sess.logits()
        _check_logits(logits, i)
        acc = None if accept is None else (lambda v, p=targets[:i]: accept(p, v))
        try:
            ranks.append(rank_of(logits, x, mask, acc))
        except CalgacusError as exc:
            raise CalgacusError(
                f"token {i} of the text (id {x}, {lm.decode_ids([x])!r}) is not admissible: "
                f"{exc}; the text was altered, or the model/key differ"
            ) from None
        if logprobs is not None:
            logprobs.append(float(logits.double().log_softmax(-1)[x]))
        if i + 1 < len(targets):
            sess.append(x)
    return ranks


def tokens_from_ranks(
    lm: RankLM,
    context_ids: Sequence[int],
    ranks: Sequence[int],
    accept: Callable[[list[int], int], bool] | None = None,
    logprobs: list[float] | None = None,
) -> list[int]:
    """``s_i = tok_{c + s_<i}(r_i)`` autoregressively for i = 1..n (the inverse of `token_ranks`)."""
    ranks = [int(r) for r in ranks]
    if not ranks:
        return []
    mask = lm.admissible_mask()
    sess = lm.session(context_or_start(lm, context_ids))
    out: list[int] = []
    for i, r in enumerate(ranks):
        logits = sess.logits()
        _check_logits(logits, i)
        acc = None if accept is None else (lambda v, p=list(out): accept(p, v))
        try:
            v = token_at_rank(logits, r, mask, acc)
        except CalgacusError as exc:
            raise CalgacusError(f"step {i}: {exc}") from None
        out.append(v)
        if logprobs is not None:
            logprobs.append(float(logits.double().log_softmax(-1)[v]))
        if i + 1 < len(ranks):
            sess.append(v)
    return out
