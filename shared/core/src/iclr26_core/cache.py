"""The user cache directory of iclr26 (``$ICLR26_CACHE``, else ``$XDG_CACHE_HOME/iclr26`` or platformdirs')."""

from __future__ import annotations

import os
from pathlib import Path


def default_root() -> Path:
    """The user's cache root without ``$ICLR26_CACHE``: ``$XDG_CACHE_HOME/iclr26``, else platformdirs'."""
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "iclr26"
    import platformdirs

    return Path(platformdirs.user_cache_dir("iclr26"))


def cache_dir(*parts: str) -> Path:
    """``<cache root>/<parts...>``, created if missing."""
    root = os.environ.get("ICLR26_CACHE")
    base = Path(root) if root else default_root()
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
