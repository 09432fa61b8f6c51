"""The constrained multiple-choice prompt (BOLT's "decision surface" prompt).

The paper's user turn: an instruction to choose exactly one option, the comma-separated options, a rule to
output only the option text, the question and an answer cue; the option text is the assistant turn. With a
chat template (``tokenizer.chat_template``) the prompt is the user turn rendered with the generation prompt;
without one, a plain ``Question … Options … Answer:`` template (and `OptionScorer` warns once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# the official code's DEFAULT_CONSTRAIN_TEMPLATE, with named fields
PAPER_INSTRUCTION = (
    "Answer the question by choosing EXACTLY ONE option from the set below.\n"
    "Options: {options}\n"
    "Rules: output EXACTLY the chosen option text; no punctuation, no explanation.\n"
    "Q: {question}\n"
    "A:"
)
PLAIN_TEMPLATE = "Question: {question}\nOptions: {options}\nAnswer:"


@dataclass(frozen=True)
class PromptTemplate:
    """How an item becomes (prompt text, answer text).

    ``user``: format string with ``{question}``, ``{options}`` (joined by ``separator``) and ``{context}``
    (``context_format`` applied to the item's context, "" without one). ``chat``: True renders with the
    tokenizer's chat template, False is plain text, None picks the chat template when the tokenizer has one.
    In plain mode the answer text is ``answer_prefix + option + answer_suffix`` (e.g. the EOS token, so
    that an option's score includes "and then the answer ends").
    """

    user: str = PAPER_INSTRUCTION
    chat: bool | None = None
    answer_prefix: str = " "
    answer_suffix: str = ""
    separator: str = ", "
    context_format: str = "{context}\n"

    def user_text(self, question: str, options: Sequence[str], context: str | None = None) -> str:
        ctx = self.context_format.format(context=context) if context else ""
        text = self.user.format(question=question.strip(), options=self.separator.join(options), context=ctx)
        if ctx and "{context}" not in self.user:
            text = ctx + text
        return text

    def uses_chat(self, tokenizer: Any) -> bool:
        has = bool(getattr(tokenizer, "chat_template", None))
        return has if self.chat is None else bool(self.chat)

    def render(
        self, tokenizer: Any, user_text: str, answer: str | None, image: bool = False
    ) -> tuple[str, str]:
        """(prompt string, joint string): the prompt ends where the scored answer begins; the joint string is
        prompt + answer (with ``answer=None`` the joint string is the prompt). A chat template that re-renders
        the user turn once an assistant turn follows gives a joint string that does not start with the prompt;
        `OptionScorer` then warns and scores from the prompt's token length (the official code's rule)."""
        if self.uses_chat(tokenizer):
            content: Any = user_text
            if image:
                content = [{"type": "image"}, {"type": "text", "text": user_text}]
            msgs = [{"role": "user", "content": content}]
            prompt = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            if answer is None:
                return prompt, prompt
            full = tokenizer.apply_chat_template(
                [*msgs, {"role": "assistant", "content": answer}], add_generation_prompt=False, tokenize=False
            )
            return prompt, full
        if answer is None:
            return user_text, user_text
        return user_text, user_text + self.answer_prefix + answer + self.answer_suffix


PLAIN = PromptTemplate(user=PLAIN_TEMPLATE, chat=False)
