"""The pluggable LLM operators: a ``paraphraser`` (SPRIG's SUB edit, the GA's rephrase) and a ``proposer`` (the
GA's four LLM-driven operators), from a CLI spec.

A spec is ``module:function`` (any importable callable with the right signature) or ``lm:PATH`` (a local causal
LM, e.g. an instruct model, that writes the text by sampling). The scored model and the operator model are
independent. The official code paraphrases with Pegasus (10 beams, temperature 1.5, max length 60) and asks an
LLM for the GA's edits; ``lm:PATH`` is our chat-prompted stand-in for both (its instructions are ours).

- paraphraser: ``f(text) -> list[str]``
- proposer: ``g(op, prompt) -> SystemPrompt | None`` with ``op`` in add_useful, add_useless, refine_subset,
  rephrase (None: the GA's offline fallback runs)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from iclr26_core.errors import UserError

from .components import Component, SystemPrompt

INSTRUCTIONS = {
    "paraphrase": "Paraphrase this sentence. Reply with the paraphrase only.\n\n{text}",
    "add_useful": "Here is a system prompt for an AI assistant:\n\n{text}\n\nWrite one new sentence to add to "
    "it that would make the assistant answer questions more accurately. Reply with the sentence only.",
    "add_useless": "Here is a system prompt for an AI assistant:\n\n{text}\n\nWrite one new neutral sentence "
    "to add to it. Reply with the sentence only.",
    "refine_subset": "Rewrite this system prompt for an AI assistant as one or two concise sentences that keep "
    "its meaning. Reply with the rewritten prompt only.\n\n{text}",
}


class LMWriter:
    """Samples short texts from a causal LM through its chat template (plain text when it has none)."""

    def __init__(
        self, model: Any, tokenizer: Any, *, n: int = 10, temperature: float = 1.0, max_new_tokens: int = 60
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.n, self.temperature, self.max_new_tokens = int(n), float(temperature), int(max_new_tokens)
        self.calls = 0

    def write(self, instruction: str, n: int) -> list[str]:
        import torch

        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(
                [{"role": "user", "content": instruction}], tokenize=False, add_generation_prompt=True
            )
        else:
            text = instruction + "\n"
        ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        ids = ids.to(next(self.model.parameters()).device)
        with torch.no_grad():
            gen = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=self.temperature,
                max_new_tokens=self.max_new_tokens,
                num_return_sequences=n,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
        self.calls += 1
        outs = [tok.decode(g[ids.shape[1] :], skip_special_tokens=True) for g in gen]
        lines = [o.strip().split("\n")[0].strip().strip('"') for o in outs]
        return [x for x in dict.fromkeys(lines) if x]

    def paraphraser(self, text: str) -> list[str]:
        return self.write(INSTRUCTIONS["paraphrase"].format(text=text), self.n)

    def proposer(self, op: str, prompt: SystemPrompt) -> SystemPrompt | None:
        parts = list(prompt)
        if op == "rephrase":
            if not parts:
                return None
            alts = self.write(INSTRUCTIONS["paraphrase"].format(text=parts[0].text), 1)
            return (
                SystemPrompt(
                    [
                        Component(
                            f"{parts[0].identity}~lm", alts[0], parts[0].category, source=parts[0].identity
                        ),
                        *parts[1:],
                    ]
                )
                if alts
                else None
            )
        if op not in INSTRUCTIONS:
            return None
        got = self.write(INSTRUCTIONS[op].format(text=prompt.render() or "(empty)"), 1)
        if not got:
            return None
        new = Component(f"lm{self.calls:05d}", got[0], "proposed")
        return SystemPrompt([new]) if op == "refine_subset" else SystemPrompt([*parts, new])


def load_operator(spec: str | None, kind: str, device: str = "cpu") -> Callable | None:
    """The callable a CLI spec names (``kind``: paraphraser | proposer); None stays None."""
    if not spec:
        return None
    if spec.startswith("lm:"):
        from iclr26_core.models import load_causal_lm, load_tokenizer

        path = spec[3:]
        writer = LMWriter(load_causal_lm(path).to(device).eval(), load_tokenizer(path))
        return getattr(writer, kind)
    module, _, name = spec.partition(":")
    if not module or not name:
        raise UserError(f"--{kind} must be module:function or lm:PATH, got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise UserError(f"--{kind} {spec!r}: cannot import it ({e})") from None
    if not callable(fn):
        raise UserError(f"--{kind} {spec!r} is not callable")
    return fn
