"""The package's error type: a user mistake, reported by the CLI as one line (exit status 2)."""

from iclr26_core.errors import UserError


class GBAError(UserError, ValueError):
    """Bad input to an `iclr26_gba` function (wrong shapes, impossible settings, NaN data ...)."""
