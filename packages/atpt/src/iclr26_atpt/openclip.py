"""The open_clip adapter: `TestTimePromptTuner` takes an ``open_clip`` CLIP (``open_clip.model.CLIP``: the OpenAI
and LAION ViT / ResNet CLIPs) as well as a `transformers` one.

The text path mirrors ``open_clip.model.CLIP.encode_text`` with the shared context spliced in after the token
embedding: token embedding (context at its positions) → + positional embedding → ``transformer`` with the causal
``attn_mask`` → ``ln_final`` → pooling (``argmax`` of the ids, or the ``eos`` id) → ``text_projection``. With the
initial context it equals ``encode_text`` (tested on a randomly initialised small open_clip CLIP).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .prompt import ContextLearner
from .validate import DEFAULT_TEMPLATE, AtptError, check_class_names, split_template


def import_open_clip():
    """``import open_clip`` with wandb hidden: open_clip imports timm, whose ``timm.utils.summary`` imports wandb when
    it is installed; wandb's import takes seconds and patches sys.stdout/stderr (its console capture), which swallowed
    the run's log lines and progress bars. timm treats the missing wandb as optional."""
    import sys

    if "open_clip" in sys.modules:
        return sys.modules["open_clip"]
    hide = "wandb" not in sys.modules
    if hide:
        sys.modules["wandb"] = None  # `import wandb` raises ImportError
    try:
        import open_clip
    finally:
        if hide and sys.modules.get("wandb", 0) is None:
            del sys.modules["wandb"]
    return open_clip


def is_open_clip(model) -> bool:
    """True for an open_clip CLIP with the classic text tower (``token_embedding`` + ``transformer``)."""
    return all(hasattr(model, a) for a in ("encode_text", "encode_image", "token_embedding", "attn_mask"))


def tokenize(tokenizer, texts: list[str], context_length: int) -> torch.Tensor:
    """ids [N, context_length] from an open_clip tokenizer, or from a transformers tokenizer padded to the model's
    context length."""
    if hasattr(tokenizer, "sot_token_id") or not hasattr(tokenizer, "pad_token_id"):
        return torch.as_tensor(tokenizer(texts, context_length=context_length))
    enc = tokenizer(texts, padding="max_length", max_length=context_length, return_tensors="pt")
    return enc["input_ids"]


def context_ids(tokenizer, ctx_init: str) -> list[int]:
    """The token ids of ``ctx_init`` without special tokens."""
    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "sot_token_id"):  # open_clip SimpleTokenizer
        return list(tokenizer.encode(ctx_init))
    return list(tokenizer(ctx_init, add_special_tokens=False)["input_ids"])


class OpenClipPromptLearner(ContextLearner):
    """`PromptLearner` for an open_clip CLIP: ``ctx`` [n_ctx, width] is the only trainable tensor."""

    def __init__(
        self,
        model,
        tokenizer,
        class_names: list[str],
        template: str = DEFAULT_TEMPLATE,
        n_ctx: int | None = None,
    ):
        super().__init__()
        check_class_names(class_names)
        if not is_open_clip(model):
            raise AtptError("not an open_clip CLIP with a token-embedding text tower (open_clip.model.CLIP)")
        if getattr(model, "logit_bias", None) is not None:
            raise AtptError(
                "open_clip models with a logit bias (SigLIP) are not supported: TPT needs softmax logits"
            )
        self.clip = model
        ctx_init, _ = split_template(template)
        ctx = context_ids(tokenizer, ctx_init)
        prompts = self._prompts(template, class_names, ctx, n_ctx)
        ids = tokenize(tokenizer, prompts, int(model.context_length))
        self._locate_context(ids, ctx, ctx_init)
        if model.text_pool_type == "argmax":
            pos = ids.argmax(-1)
        elif model.text_pool_type == "eos":
            pos = (ids == model.text_eos_id).int().argmax(-1)
        else:
            raise AtptError(
                f"open_clip text pool type {model.text_pool_type!r} is not supported (argmax, eos)"
            )
        self._learn_context(model, model.token_embedding, ctx, ids, pos, class_names)

    def text_features(self, normalize: bool = True) -> torch.Tensor:
        m = self.clip
        tok = m.token_embedding(self.input_ids)
        n = tok.shape[0]
        x = self.splice(tok)
        x = x + m.positional_embedding.to(x.dtype)
        x = m.ln_final(m.transformer(x, attn_mask=m.attn_mask))
        x = x[torch.arange(n, device=x.device), self.eos_positions]
        proj = m.text_projection
        if proj is not None:
            x = proj(x) if isinstance(proj, nn.Module) else x @ proj
        return F.normalize(x, dim=-1) if normalize else x


def open_clip_normalisation(model, preprocess=None) -> tuple[list[float], list[float]]:
    """(mean, std) of the image normalisation: from the preprocess transform's Normalize, else the model's
    preprocess config, else OpenAI's constants."""
    for t in getattr(preprocess, "transforms", []):
        if hasattr(t, "mean") and hasattr(t, "std"):
            return list(t.mean), list(t.std)
    cfg = getattr(model.visual, "preprocess_cfg", None) or {}
    if "mean" in cfg and "std" in cfg:
        return list(cfg["mean"]), list(cfg["std"])
    oc = import_open_clip()
    return list(oc.constants.OPENAI_DATASET_MEAN), list(oc.constants.OPENAI_DATASET_STD)


def open_clip_to_tensor(preprocess, image) -> torch.Tensor:
    """A PIL image through the preprocess transform without its Normalize: [3, H, W] in [0, 1]."""
    steps = [t for t in getattr(preprocess, "transforms", []) if not hasattr(t, "std")]
    if not steps:
        raise AtptError("pass open_clip's preprocess transform as the processor to tune PIL images")
    for t in steps:
        image = t(image)
    return image.float()
