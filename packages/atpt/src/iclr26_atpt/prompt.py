"""`PromptLearner`: M shared context vectors spliced into the class prompts "[V₁..V_M] [CLASS_c]." of a
`transformers` ``CLIPModel``; the text features are computed from the text tower's submodules.

``CLIPTextModel.forward`` takes only ``input_ids``, so the text path is rebuilt: ``embeddings(inputs_embeds=…)``
with V at the context positions → causal mask → ``encoder(…, is_causal=True)`` → ``final_layer_norm`` → the
hidden state at the EOS position found from the tokenised ids → ``text_projection``. With the context equal to the
embedded context words this equals ``CLIPModel.get_text_features`` of the template's prompts, e.g. "a photo of a
{c}." as CLIP's and TPT's prompts end with a full stop (tested against a ``CLIPProcessor``). A config with ``eos_token_id == 2``
uses transformers' legacy argmax-of-ids pooling; we follow the same rule so both paths agree.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .validate import DEFAULT_TEMPLATE, AtptError, check_class_names, split_template


def _find(seq: list[int], sub: list[int]) -> int:
    for i in range(len(seq) - len(sub) + 1):
        if seq[i : i + len(sub)] == sub:
            return i
    return -1


def pool_positions(input_ids: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """The EOS position of each row, as transformers' CLIP text model pools (legacy argmax when eos id == 2)."""
    if eos_token_id == 2:
        return input_ids.to(torch.int).argmax(-1)
    return (input_ids == eos_token_id).int().argmax(-1)


class ContextLearner(nn.Module):
    """What the prompt learners of both CLIP libraries share: M context vectors ``ctx`` (the only tensor that
    requires gradients) spliced in at one position ``start`` of every tokenised class prompt ``input_ids``, a
    frozen CLIP, and ``reset()`` to the initial context. A subclass tokenises, finds its pooling positions and
    runs its library's text tower on `splice` of its token embeddings."""

    @staticmethod
    def _prompts(template: str, class_names: list[str], ctx_ids: list[int], n_ctx: int | None) -> list[str]:
        """The class prompts of ``template``; ``n_ctx`` (when given) must be the context's token count."""
        ctx_init, _ = split_template(template)
        if n_ctx is not None and len(ctx_ids) != n_ctx:
            raise AtptError(f"the context {ctx_init!r} is {len(ctx_ids)} tokens, but n_ctx={n_ctx}")
        return [template.format(name) for name in class_names]

    def _locate_context(self, ids: torch.Tensor, ctx_ids: list[int], ctx_init: str) -> None:
        starts = {_find(row, ctx_ids) for row in ids.tolist()}
        if len(starts) != 1 or -1 in starts:
            raise AtptError(f"cannot locate the context {ctx_init!r} at one position in every class prompt")
        self.start, self.n_ctx = starts.pop(), len(ctx_ids)

    def _learn_context(
        self, clip, embedding: nn.Embedding, ctx_ids: list[int], ids, positions, class_names: list[str]
    ) -> None:
        self.register_buffer("input_ids", ids, persistent=False)
        self.register_buffer("eos_positions", positions, persistent=False)
        with torch.no_grad():
            init = embedding(torch.tensor(ctx_ids, device=embedding.weight.device)).detach().clone()
        self.register_buffer("ctx_init", init, persistent=False)
        self.ctx = nn.Parameter(init.clone())
        for p in clip.parameters():
            p.requires_grad_(False)
        self.class_names = list(class_names)

    def reset(self) -> None:
        with torch.no_grad():
            self.ctx.copy_(self.ctx_init)

    def splice(self, tok: torch.Tensor) -> torch.Tensor:
        """The token embeddings [N, L, D] of the class prompts with ``ctx`` at the context positions."""
        ctx = self.ctx.to(tok.dtype).unsqueeze(0).expand(tok.shape[0], -1, -1)
        return torch.cat([tok[:, : self.start], ctx, tok[:, self.start + self.n_ctx :]], dim=1)


class PromptLearner(ContextLearner):
    """Learnable context [V₁..V_M] shared by all classes (the words of ``template`` before ``{}``; M = their token
    count, checked against ``n_ctx`` when given); only ``ctx`` requires gradients.

    ``text_features()`` → [N, P] L2-normalised projected class text features; ``reset()`` restores the initial
    context bit for bit (TPT is episodic: one reset per test image).
    """

    def __init__(
        self,
        clip,
        tokenizer,
        class_names: list[str],
        template: str = DEFAULT_TEMPLATE,
        n_ctx: int | None = None,
    ):
        super().__init__()
        check_class_names(class_names)
        self.clip = clip
        text_model = clip.text_model
        self.eos_token_id = int(text_model.config.eos_token_id)
        ctx_init, _ = split_template(template)
        ctx_ids = tokenizer(ctx_init, add_special_tokens=False)["input_ids"]
        prompts = self._prompts(template, class_names, ctx_ids, n_ctx)
        enc = tokenizer(prompts, padding=True, return_tensors="pt")
        ids = enc["input_ids"]
        self._locate_context(ids, ctx_ids, ctx_init)
        eos = pool_positions(ids, self.eos_token_id)
        if self.eos_token_id != 2 and not bool((ids == self.eos_token_id).any(-1).all()):
            raise AtptError(
                f"the tokenizer does not append the text config's eos_token_id={self.eos_token_id}; "
                "set text_config.eos_token_id to the tokenizer's EOS id"
            )
        self._learn_context(clip, text_model.embeddings.token_embedding, ctx_ids, ids, eos, class_names)

    def text_features(self, normalize: bool = True) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        tm = self.clip.text_model
        tok = tm.embeddings.token_embedding(self.input_ids)
        n = tok.shape[0]
        h = tm.embeddings(inputs_embeds=self.splice(tok))
        mask = create_causal_mask(config=tm.config, inputs_embeds=h, attention_mask=None, cache=None)
        h = tm.encoder(inputs_embeds=h, attention_mask=mask, is_causal=True).last_hidden_state
        h = tm.final_layer_norm(h)
        pooled = h[torch.arange(n, device=h.device), self.eos_positions]
        feats = self.clip.text_projection(pooled)
        return F.normalize(feats, dim=-1) if normalize else feats
