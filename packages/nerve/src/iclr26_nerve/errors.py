"""`NerVEError`: a user mistake (wrong shape, NaN activations, unknown architecture ...).

It is an `iclr26_core.errors.UserError` (the CLI prints it as one line, exit 2) and a `ValueError`
(what library users expect to catch).
"""

from iclr26_core.errors import UserError


class NerVEError(UserError, ValueError):
    """A mistake in what was passed to NerVE; one clear line."""
