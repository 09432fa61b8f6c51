"""Documents: cells grouped by experimental context, the only link between the two unpaired modalities.

For each context g present in both modalities a document holds S image cells and S expression cells sampled
*with replacement* from g. The permuted-document control takes the expression half from another context
(a derangement), which breaks the cross-modal grouping while keeping everything else equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class DocumentPlan:
    """Cell ids per document: ``image_ids``/``expression_ids`` are int arrays [G, S] (row indices into each
    modality); ``context[i]`` is document i's context, ``expression_context[i]`` the context its expression
    half came from (equal to ``context`` unless permuted); ``dropped`` counts contexts seen in one modality only;
    ``paired`` marks slots whose image and expression cells are a known pair (only with pair ids)."""

    image_ids: np.ndarray
    expression_ids: np.ndarray
    context: np.ndarray
    expression_context: np.ndarray
    dropped: dict[str, int] = field(default_factory=dict)
    paired: np.ndarray | None = None  # [G, S] bool: the slot holds a cell pair (the ``pair_key`` extension)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.image_ids.shape)


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of range(n) with no fixed point (rejection sampling); n >= 2."""
    if n < 2:
        from iclr26_core.errors import UserError

        raise UserError("the permuted-document control needs at least 2 contexts")
    while True:
        p = rng.permutation(n)
        if not (p == np.arange(n)).any():
            return p


def shared_contexts(image_context: Sequence, expression_context: Sequence) -> tuple[list, dict[str, int]]:
    """Contexts present in both modalities (sorted) and how many were dropped from each side.
    `UserError` when none is shared."""
    from iclr26_core.errors import UserError

    img, expr = set(np.asarray(image_context).tolist()), set(np.asarray(expression_context).tolist())
    shared = sorted(img & expr, key=str)
    dropped = {"image_only": len(img - expr), "expression_only": len(expr - img)}
    if not shared:
        raise UserError(
            f"no context is present in both modalities ({len(img)} image contexts, {len(expr)} expression)"
        )
    return shared, dropped


def _index(contexts: Sequence) -> dict:
    out: dict = {}
    for i, c in enumerate(np.asarray(contexts).tolist()):
        out.setdefault(c, []).append(i)
    return {c: np.asarray(v) for c, v in out.items()}


def _partners(image_pair: Sequence | None, expression_pair: Sequence | None) -> np.ndarray | None:
    """For each image cell the row of its expression partner (same pair id), or -1; None without pair ids.
    Empty/NaN ids are unpaired; an id used twice in one modality is a `UserError`."""
    if image_pair is None and expression_pair is None:
        return None
    from iclr26_core.errors import UserError

    if image_pair is None or expression_pair is None:
        raise UserError("pair ids must be given for both modalities (unpaired cells: empty)")

    def ids(x, what):
        v = [None if (t is None or t != t or str(t) == "") else str(t) for t in np.asarray(x, dtype=object)]
        seen = [t for t in v if t is not None]
        if len(seen) != len(set(seen)):
            raise UserError(f"a pair id occurs more than once among the {what} cells")
        return v

    row = {t: i for i, t in enumerate(ids(expression_pair, "expression")) if t is not None}
    return np.array([row.get(t, -1) if t is not None else -1 for t in ids(image_pair, "image")])


class DocumentSampler:
    """The shared contexts and each context's cell ids of both modalities, computed once, for drawing many
    document plans (a training loop draws one per step). ``image_pair``/``expression_pair``: optional pair ids
    per cell (the ``pair_key`` extension, not in the paper): a paired image cell brings its expression partner
    into the same document slot (unless permuted)."""

    def __init__(
        self,
        image_context: Sequence,
        expression_context: Sequence,
        contexts: Sequence | None = None,
        image_pair: Sequence | None = None,
        expression_pair: Sequence | None = None,
    ) -> None:
        self.partner = _partners(image_pair, expression_pair)
        shared, self.dropped = shared_contexts(image_context, expression_context)
        if self.partner is not None:
            ic, ec = np.asarray(image_context, dtype=object), np.asarray(expression_context, dtype=object)
            rows = np.flatnonzero(self.partner >= 0)
            if (ic[rows] != ec[self.partner[rows]]).any():
                from iclr26_core.errors import UserError

                raise UserError("paired cells must share their context (a pair id links two contexts)")
        if contexts is not None:
            keep = set(np.asarray(contexts).tolist())
            shared = [c for c in shared if c in keep]
        self.shared = shared
        self.img_idx, self.expr_idx = _index(image_context), _index(expression_context)

    def sample(
        self, cells_per_document: int, n_documents: int | None = None, permute: bool = False, seed: int = 0
    ) -> DocumentPlan:
        """One plan; see `make_documents`."""
        rng = np.random.default_rng(seed)
        shared = self.shared
        n_shared = len(shared)
        if n_documents is None:
            doc_ctx = np.arange(n_shared)
        else:
            reps = int(np.ceil(n_documents / n_shared))
            doc_ctx = np.concatenate([rng.permutation(n_shared) for _ in range(reps)])[:n_documents]
        perm = derangement(n_shared, rng) if permute else np.arange(n_shared)
        S = int(cells_per_document)
        image_ids = np.stack([rng.choice(self.img_idx[shared[g]], S, replace=True) for g in doc_ctx])
        expr_ids = np.stack([rng.choice(self.expr_idx[shared[perm[g]]], S, replace=True) for g in doc_ctx])
        paired = None
        if self.partner is not None:
            partner = self.partner[image_ids]
            paired = (partner >= 0) & (not permute)
            expr_ids = np.where(paired, partner, expr_ids)
        ctx = np.asarray(shared, dtype=object)
        return DocumentPlan(image_ids, expr_ids, ctx[doc_ctx], ctx[perm[doc_ctx]], dict(self.dropped), paired)


def make_documents(
    image_context: Sequence,
    expression_context: Sequence,
    *,
    cells_per_document: int = 16,
    n_documents: int | None = None,
    permute: bool = False,
    seed: int = 0,
    contexts: Sequence | None = None,
    image_pair: Sequence | None = None,
    expression_pair: Sequence | None = None,
) -> DocumentPlan:
    """Sample documents: one per shared context (``n_documents=None``) or ``n_documents`` documents of
    contexts drawn at random (each context at most once while they last). Within a document, S =
    ``cells_per_document`` cells per modality are drawn with replacement. ``permute=True`` takes the expression
    half from the context ``derangement[g]`` (never g itself). ``contexts`` restricts to these contexts.
    ``image_pair``/``expression_pair`` (extension): pair ids per cell; a paired image cell's expression partner
    takes the same slot (``plan.paired``), other slots are drawn as usual."""
    sampler = DocumentSampler(image_context, expression_context, contexts, image_pair, expression_pair)
    return sampler.sample(cells_per_document, n_documents, permute, seed)


def covering_documents(contexts: Sequence, cells_per_document: int, seed: int = 0) -> tuple[np.ndarray, list]:
    """Documents of one modality that cover every cell of each context once (the last chunk of a context is
    topped up by resampling its cells): ids [n_docs, S] and each document's context."""
    rng = np.random.default_rng(seed)
    ids, ctx = [], []
    for c, idx in _index(contexts).items():
        idx = rng.permutation(idx)
        for start in range(0, len(idx), cells_per_document):
            chunk = idx[start : start + cells_per_document]
            if len(chunk) < cells_per_document:
                chunk = np.concatenate([chunk, rng.choice(idx, cells_per_document - len(chunk))])
            ids.append(chunk)
            ctx.append(c)
    return np.stack(ids), ctx
