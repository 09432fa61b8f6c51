"""The two primitives of Calgacus: token ranks under a causal LM, and tokens from ranks.

For a context c with next-token scores ``logit_c`` (a 1-D tensor ``[V]``) and the admissible alphabet
``A`` (a boolean mask ``[V]``: special tokens excluded),

    rank_c(v) = 1 + #{u ∈ A : logit_c(u) > logit_c(v)} + #{u ∈ A : logit_c(u) = logit_c(v), u < v}

i.e. the 1-based position of ``v`` in a *stable* sort of ``−logit_c`` over ``A`` (ties broken by token id
ascending), and ``tok_c(r)`` is the admissible token at position ``r`` of that order, so
``tok_c(rank_c(v)) = v`` for every admissible ``v``.

An optional ``accept(v) -> bool`` filter (the ``admissible="canonical"`` rule) reorders the alphabet at one
step: the accepted candidates first (by logit), then the rejected ones (by logit). Ranks and tokens are
positions in that permutation of the *same* alphabet on both sides, so a rank can never overflow
(spec, "No rank can overflow"). The filter is evaluated lazily in rank order (in chunks when it offers
``many``), so a token among the accepted costs the candidates above it only; a rejected one costs a
full pass.

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


class _Classes:
    """The admissible ids in rank order, split lazily by a filter into accepted and rejected candidates.

    ``accept`` is a per-candidate callable; when it has a ``many(ids) -> list[bool]`` method, candidates are
    classified in chunks (one batched call per chunk), which is what makes a full pass over a 10^5-token
    vocabulary affordable when a rank falls in the rejected tail.
    """

    FIRST, LARGEST = 8, 512  # chunk sizes: small first (ranks are mostly small), doubling

    def __init__(self, order: list[int], accept: Any) -> None:
        self.order = order
        self.accept = accept
        self.flags: list[bool] = []
        self.chunk = self.FIRST

    def _more(self) -> bool:
        i = len(self.flags)
        if i >= len(self.order):
            return False
        chunk = self.order[i : i + self.chunk]
        self.chunk = min(2 * self.chunk, self.LARGEST)
        many = getattr(self.accept, "many", None)
        self.flags += [bool(f) for f in many(chunk)] if many else [bool(self.accept(v)) for v in chunk]
        return True

    def flag(self, pos: int) -> bool:
        while pos >= len(self.flags):
            self._more()
        return self.flags[pos]

    def n_accepted(self) -> int:
        while self._more():
            pass
        return sum(self.flags)


def rank_of(logits: Any, token: int, mask: Any, accept: Accept | None = None) -> int:
    """``rank_c(token)`` (1-based) in the step's permutation of the admissible alphabet; logits/mask ``[V]``.

    Without a filter the permutation is the stable sort of −logits over admissible ids. With ``accept`` it is
    the accepted candidates first (by logit), then the rejected ones (by logit): a permutation of the *same*
    alphabet, so every admissible token has a rank and no rank can overflow. Raises `CalgacusError` if
    ``token`` is not admissible.
    """
    import torch

    if not 0 <= token < logits.shape[0] or not bool(mask[token]):
        raise CalgacusError(f"token id {token} is not in the admissible alphabet")
    if accept is None:
        lv = logits[token]
        ids = torch.arange(logits.shape[0], device=logits.device)
        before = mask & ((logits > lv) | ((logits == lv) & (ids < token)))
        return 1 + int(before.sum())
    order = _order(logits, mask).tolist()
    pos = order.index(token)
    cls = _Classes(order, accept)
    if cls.flag(pos):
        return 1 + sum(cls.flags[:pos])
    n_acc = cls.n_accepted()
    return n_acc + 1 + sum(not f for f in cls.flags[:pos])


def token_at_rank(logits: Any, rank: int, mask: Any, accept: Accept | None = None) -> int:
    """``tok_c(rank)``: the token at 1-based position ``rank`` of the step's permutation (see `rank_of`)."""
    return token_at_rank_ex(logits, rank, mask, accept)[0]


def token_at_rank_ex(logits: Any, rank: int, mask: Any, accept: Accept | None = None) -> tuple[int, bool]:
    """`token_at_rank` and whether the token is one the filter accepted (always True without a filter)."""
    if rank < 1:
        raise CalgacusError(f"rank {rank} is not a positive integer")
    order = _order(logits, mask)
    if rank > order.numel():
        raise CalgacusError(f"rank {rank} exceeds the admissible alphabet ({order.numel()} tokens)")
    if accept is None:
        return int(order[rank - 1]), True
    cls = _Classes(order.tolist(), accept)
    seen = 0
    pos = 0
    while pos < len(cls.order):
        if cls.flag(pos):
            seen += 1
            if seen == rank:
                return cls.order[pos], True
        pos += 1
    rejected = [v for v, f in zip(cls.order, cls.flags) if not f]
    return rejected[rank - seen - 1], False


def _check_logits(logits: Any, step: int) -> None:
    import torch

    if not bool(torch.isfinite(logits).any()) or bool(torch.isnan(logits).any()):
        raise CalgacusError(f"the model returned NaN/inf logits at step {step}")


def context_or_start(lm: RankLM, context_ids: Sequence[int]) -> list[int]:
    """The context ids, or the model's start ids (BOS, else a newline token) when empty."""
    ids = list(context_ids)
    return ids if ids else list(lm.start_ids)


class _StepFilter:
    """A ``accept(prefix, v)`` filter bound to one step's prefix (with its batched ``many`` when offered)."""

    def __init__(self, accept: Any, prefix: list[int]) -> None:
        self.accept, self.prefix = accept, prefix
        if hasattr(accept, "many"):
            self.many = lambda vs: accept.many(prefix, vs)

    def __call__(self, v: int) -> bool:
        return self.accept(self.prefix, v)


def token_ranks(
    lm: RankLM,
    context_ids: Sequence[int],
    target_ids: Sequence[int],
    accept: Callable[[list[int], int], bool] | None = None,
    logprobs: list[float] | None = None,
) -> list[int]:
    """``r_i = rank_{c + x_<i}(x_i)`` for i = 1..n with one incremental session (n − 1 steps after c).

    ``accept(prefix, v)``: optional filter on candidate ``v`` after ``prefix = x_<i`` (it reorders the
    alphabet, see `rank_of`). When ``logprobs`` is a list, the full-vocabulary log-probability of each
    ``x_i`` is appended to it.
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
        acc = None if accept is None else _StepFilter(accept, targets[:i])
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
    rejected: list[int] | None = None,
) -> list[int]:
    """``s_i = tok_{c + s_<i}(r_i)`` autoregressively for i = 1..n (the inverse of `token_ranks`).

    With a filter, the steps whose token is one the filter rejected (a rank beyond the accepted
    candidates) are appended to ``rejected`` when it is a list.
    """
    ranks = [int(r) for r in ranks]
    if not ranks:
        return []
    mask = lm.admissible_mask()
    sess = lm.session(context_or_start(lm, context_ids))
    out: list[int] = []
    for i, r in enumerate(ranks):
        logits = sess.logits()
        _check_logits(logits, i)
        acc = None if accept is None else _StepFilter(accept, list(out))
        try:
            v, ok = token_at_rank_ex(logits, r, mask, acc)
        except CalgacusError as exc:
            raise CalgacusError(f"step {i}: {exc}") from None
        out.append(v)
        if not ok and rejected is not None:
            rejected.append(i)
        if logprobs is not None:
            logprobs.append(float(logits.double().log_softmax(-1)[v]))
        if i + 1 < len(ranks):
            sess.append(v)
    return out
