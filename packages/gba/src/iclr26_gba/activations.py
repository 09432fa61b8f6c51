"""Residual-stream activations of any `transformers` model: the data SAEs are trained on.

    hidden_states = model(input_ids, attention_mask, output_hidden_states=True).hidden_states
    acts = hidden_states[layer][attention_mask == 1]        # [N, d], padding dropped

``layer`` indexes ``hidden_states``: 0 is the embedding output, L the last block's output.
"""

from __future__ import annotations

import string
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


def text_tokenizer(model_path: str, vocab_size: int | None, log=print):
    """The tokenizer saved with the model, else a character tokenizer over printable ASCII (offline)."""
    from iclr26_core.tokenizers import char_tokenizer, load_tokenizer

    if Path(model_path).expanduser().is_dir():
        try:
            return load_tokenizer(Path(model_path).expanduser())
        except (OSError, ValueError, TypeError):
            pass
    tok = char_tokenizer(string.printable)
    if vocab_size is not None and len(tok) > vocab_size:
        raise GBAError(
            f"the model at {model_path!r} has no tokenizer and its vocabulary ({vocab_size}) is too "
            f"small for the character tokenizer ({len(tok)} ids)"
        )
    log(f"no tokenizer saved with {model_path!r}: using a character tokenizer over printable ASCII")
    return tok


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
