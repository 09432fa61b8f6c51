"""Input checks shared by the library and the CLI: each failure is one clear line (`AtptError` is a UserError)."""

from __future__ import annotations

from iclr26_core.errors import UserError

SIGN_NOTE = (
    "A-TPT maximises angular diversity (loss = L_TPT - lam*AD, lam >= 0); the official atpt_classification.py "
    "flips this sign. Pass allow_negative_lambda=True to run the inverted objective on purpose"
)


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
