"""Exceptions shared by every package.

`UserError` marks a mistake of the user (bad override, missing path, wrong shape ...). The CLI
prints its message as one line and exits with status 2, no traceback. Anything else is a bug and
keeps its traceback.
"""


class UserError(Exception):
    """A mistake of the user: reported as one clear line, exit status 2."""


class CheckpointError(UserError):
    """A checkpoint directory is missing, truncated or corrupt."""


class TrainingDiverged(UserError):
    """The loss became NaN or infinite."""
