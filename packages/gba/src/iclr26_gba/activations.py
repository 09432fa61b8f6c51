"""Residual-stream activations of any `transformers` model: the data SAEs are trained on.

    hidden_states = model(input_ids, attention_mask, output_hidden_states=True).hidden_states
    acts = hidden_states[layer][attention_mask == 1]        # [N, d], padding dropped

``layer`` indexes ``hidden_states``: 0 is the embedding output, L the last block's output.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from .errors import GBAError


def _n_layers(model) -> int | None:
    cfg = getattr(model, "config", None)
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        if cfg is not None and isinstance(getattr(cfg, name, None), int):
            return getattr(cfg, name)
    return None


@torch.no_grad()
def collect_activations(
    model,
    input_ids: torch.Tensor,
    layer: int,
    attention_mask: torch.Tensor | None = None,
    max_tokens: int | None = None,
    batch_size: int = 16,
    progress=None,
) -> torch.Tensor:
    """Hidden states of block ``layer`` for every non-padded token: [N, d] float32 on the CPU.

    input_ids [B, T] (long); attention_mask [B, T] (1 = token, 0 = padding) or None (all tokens);
    ``max_tokens`` stops after that many rows.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
        raise GBAError("input_ids must be a [batch, seq_len] tensor of token ids")
    if attention_mask is not None and attention_mask.shape != input_ids.shape:
        raise GBAError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, input_ids {tuple(input_ids.shape)}"
        )
    n_layers = _n_layers(model)
    if int(layer) < 0 or (n_layers is not None and int(layer) > n_layers):
        raise GBAError(f"layer must be in [0, {n_layers}] for this model (0 = embeddings), got {layer}")
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is not None and input_ids.numel() and int(input_ids.max()) >= vocab:
        raise GBAError(f"token id {int(input_ids.max())} is outside the model's vocabulary of {vocab}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[torch.Tensor] = []
    rows = 0
    starts = range(0, input_ids.shape[0], batch_size)
    if progress is not None:
        starts = progress(starts, total=len(starts), desc="activations")
    try:
        for i in starts:
            ids = input_ids[i : i + batch_size].to(device)
            mask = None if attention_mask is None else attention_mask[i : i + batch_size].to(device)
            hs = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            h = hs[int(layer)]
            h = h.reshape(-1, h.shape[-1]) if mask is None else h[mask.bool()]
            out.append(h.float().cpu())
            rows += h.shape[0]
            if max_tokens is not None and rows >= max_tokens:
                break
    finally:
        model.train(was_training)
    if not out:
        raise GBAError("no tokens to collect activations from")
    acts = torch.cat(out)
    return acts[:max_tokens] if max_tokens is not None else acts


def text_tokenizer(model_ref: str, vocab_size: int | None = None, log=print):
    """The tokenizer that comes with the model: ``AutoTokenizer`` of the same folder or hub id.

    ``tiny-<name>`` (the core's random-init models) gets the core's byte-level BPE of the model's
    vocabulary size, whose ids those models use. A folder without tokenizer files, or a hub id that cannot
    be loaded, is refused with one line (`GBAError`): feeding a model another tokenizer's ids is meaningless.
    """
    from iclr26_core.errors import UserError

    if model_ref.startswith("tiny-"):
        from iclr26_core.tokenizers import train_bpe

        tok = train_bpe(int(vocab_size or 512))
        log(f"{model_ref}: the core's byte-level BPE tokenizer ({len(tok)} ids)")
        return tok
    from iclr26_core.models import load_tokenizer

    try:
        tok = load_tokenizer(model_ref)
    except UserError as exc:
        raise GBAError(f"{exc}: an SAE needs the model's own tokenizer (save it next to the model)") from None
    return tok  # ids beyond the model's vocabulary are refused by `collect_activations`


def token_blocks_from_text(text: str, tokenizer, seq_len: int, max_tokens: int) -> torch.Tensor:
    """[n, seq_len] blocks of the first ``max_tokens`` tokens of ``text`` (at least one block)."""
    from iclr26_core.corpus import token_blocks

    if not text.strip():
        raise GBAError("the text is empty")
    # tokenise roughly what is needed (4 characters per token is generous for BPE, exact for characters)
    chunk = text[: max(max_tokens * 8, seq_len * 8)]
    paragraphs = [p for p in chunk.split("\n\n") if p.strip()]
    try:
        blocks = token_blocks(paragraphs, tokenizer, seq_len)
    except ValueError as exc:
        raise GBAError(f"the text is too short: {exc}") from None
    n = max(1, min(blocks.shape[0], -(-max_tokens // seq_len)))
    return blocks[:n]


def iter_paragraphs(path: str | Path | None) -> Iterator[str]:
    """Paragraphs (blank-line separated) of a UTF-8 text file read line by line, or of the pydoc text."""
    if path is None:
        from iclr26_core.corpus import pydoc_topics

        yield from (t for t in pydoc_topics().values() if t.strip())
        return
    para: list[str] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    para.append(line)
                elif para:
                    yield "".join(para)
                    para = []
    except UnicodeDecodeError:
        raise GBAError(f"{str(path)!r} is not UTF-8 text") from None
    if para:
        yield "".join(para)


def iter_token_blocks(
    texts: Iterable[str], tokenizer, seq_len: int, max_tokens: int, batch_blocks: int = 16
) -> Iterator[torch.Tensor]:
    """[≤ batch_blocks, seq_len] int64 blocks of the texts' token ids (each text followed by EOS), lazily,
    until ``max_tokens`` tokens; a tail shorter than one block is dropped unless it is all there is."""
    from iclr26_core.corpus import encode_texts

    eos = tokenizer.eos_token_id
    ids: list[int] = []
    emitted = 0
    group: list[str] = []

    def cut(final: bool) -> Iterator[torch.Tensor]:
        nonlocal ids, emitted
        n = len(ids) // seq_len
        if final and n == 0 and emitted == 0 and ids:
            yield torch.tensor([ids], dtype=torch.long)
            emitted += len(ids)
            return
        for i in range(0, n, batch_blocks):
            if emitted >= max_tokens:
                return
            k = min(batch_blocks, n - i, -(-(max_tokens - emitted) // seq_len))
            block = torch.tensor(ids[i * seq_len : (i + k) * seq_len], dtype=torch.long).view(k, seq_len)
            emitted += block.numel()
            yield block
        ids = ids[n * seq_len :]

    for text in texts:
        group.append(text)
        if len(group) == 64:
            for enc in encode_texts(group, tokenizer):
                ids.extend(enc if eos is None else [*enc, eos])
            group = []
            yield from cut(False)
            if emitted >= max_tokens:
                return
    for enc in encode_texts(group, tokenizer):
        ids.extend(enc if eos is None else [*enc, eos])
    yield from cut(True)
    if emitted == 0:
        raise GBAError("the text is empty")
