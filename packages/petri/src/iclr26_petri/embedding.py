"""Cell embeddings: pre-MST (each cell encoded alone, all tokens visible; the paper's downstream choice) and
post-MST (a cell's latents after the MST inside documents of its context)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .documents import covering_documents


def _as_tensor(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float32)) if not isinstance(x, torch.Tensor) else x.float()


@torch.no_grad()
def embed(
    model, *, images=None, counts=None, stage: str = "pre_mst", batch_size: int = 256, **documents
) -> torch.Tensor:
    """Embeddings [n, D] of ``images`` [n, C, H, W] or ``counts`` [n, n_genes]: the mean of the L pre-MST
    latents of each cell encoded alone with every token visible. ``stage="post_mst"`` needs the documents'
    contexts (see `embed_documents`; pass ``image_context``/``expression_context`` and both modalities)."""
    from iclr26_core.errors import UserError

    if stage == "post_mst":
        return embed_documents(model, images, counts, **documents)
    if stage != "pre_mst":
        raise UserError(f"stage must be 'pre_mst' or 'post_mst', got {stage!r}")
    if (images is None) == (counts is None):
        raise UserError("give exactly one of images= or counts=")
    model.eval()
    x = _as_tensor(images if images is not None else counts)
    enc = model.encode_image if images is not None else model.encode_expression
    out = [enc(x[i : i + batch_size]).mean(1) for i in range(0, len(x), batch_size)]
    return torch.cat(out)


@torch.no_grad()
def embed_documents(
    model,
    images,
    counts,
    *,
    image_context: Sequence,
    expression_context: Sequence,
    cells_per_document: int = 8,
    seed: int = 0,
    batch_docs: int = 32,
) -> tuple[torch.Tensor, ...]:
    """Post-MST embeddings (image [n_img, D], expression [n_expr, D]): every cell of one modality sits once in a
    document of its context whose other half is drawn (with replacement) from the same context; all tokens
    visible; the embedding is the mean of the cell's L post-MST latents."""
    model.eval()
    imgs, cnts = _as_tensor(images), _as_tensor(counts)
    img_ctx, expr_ctx = np.asarray(image_context), np.asarray(expression_context)
    rng = np.random.default_rng(seed)
    S = cells_per_document
    results = []
    for mod, ctx, other_ctx in (("image", img_ctx, expr_ctx), ("expression", expr_ctx, img_ctx)):
        ids, doc_ctx = covering_documents(ctx, S, seed)
        pools = {c: np.flatnonzero(other_ctx == c) for c in set(doc_ctx)}
        other = np.stack([rng.choice(pools[c], S) if len(pools[c]) else np.full(S, -1) for c in doc_ctx])
        keep = (other >= 0).all(1)
        ids, other = ids[keep], other[keep]
        n = len(imgs) if mod == "image" else len(cnts)
        acc = torch.zeros(n, model.config.hidden_size)
        for start in range(0, len(ids), batch_docs):
            a, b = ids[start : start + batch_docs], other[start : start + batch_docs]
            im_ids, ex_ids = (a, b) if mod == "image" else (b, a)
            g = len(a)
            z_i = model.encode_image(imgs[im_ids.reshape(-1)])
            z_e = model.encode_expression(cnts[ex_ids.reshape(-1)])
            h_i, h_e = model.fuse(z_i, z_e, g)
            h = (h_i if mod == "image" else h_e).mean(1)
            acc[torch.as_tensor(a.reshape(-1))] = h
        results.append(acc)
    return tuple(results)
