"""Input checks shared by the library and the CLI: each failure is one clear line (`AtptError` is a UserError)."""

from __future__ import annotations

from iclr26_core.errors import UserError

SIGN_NOTE = (
    "A-TPT maximises angular diversity (loss = L_TPT - lam*AD, lam >= 0, as the paper and the official "
    "tpt_classification.py); the released atpt_classification.py adds (-lam)*mean(-theta) = +lam*AD, which "
    "minimises it. Pass allow_negative_lambda=True (--allow-negative-lambda) to run that released objective on purpose"
)
DEFAULT_TEMPLATE = "a photo of a {}."  # CLIP's / TPT's prompt: the context words, the class name, a full stop


class AtptError(UserError):
    """A user mistake in A-TPT's inputs."""


def check_class_names(names, n_labels: int | None = None) -> None:
    names = list(names)
    if not names:
        raise AtptError("the class list is empty")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise AtptError(f"duplicate class names: {', '.join(dup)}")
    if n_labels is not None and n_labels != len(names):
        raise AtptError(f"{len(names)} class names but the labels have {n_labels} classes")


def check_tta(n_views: int, selection: float, lam: float, allow_negative_lambda: bool = False) -> None:
    if int(n_views) < 1:
        raise AtptError(f"n_views must be >= 1, got {n_views}")
    if not 0.0 < float(selection) <= 1.0:
        raise AtptError(f"selection must be in (0, 1], got {selection}")
    if float(lam) < 0 and not allow_negative_lambda:
        raise AtptError(f"lam={lam} < 0 refused. {SIGN_NOTE}")


def split_template(template: str) -> tuple[str, str]:
    """(context words, suffix) of a prompt template such as "a photo of a {}.": the words before ``{}`` become the
    learnable context, the text after it (CLIP's full stop) stays fixed."""
    if not isinstance(template, str) or template.count("{}") != 1:
        raise AtptError(f"the prompt template must contain one {{}} for the class name, got {template!r}")
    ctx, suffix = template.split("{}")
    if not ctx.strip():
        raise AtptError(
            f"the prompt template {template!r} needs context words before {{}} (e.g. 'a photo of a {{}}.')"
        )
    if not ctx.endswith(" "):
        raise AtptError(f"the prompt template {template!r} needs a space between the context and {{}}")
    return ctx.strip(), suffix
