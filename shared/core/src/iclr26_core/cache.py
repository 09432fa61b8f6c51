"""The user cache directory of iclr26 (``$ICLR26_CACHE``, else ``$XDG_CACHE_HOME/iclr26`` or platformdirs')."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``<cache root>/<parts...>``, created if missing."""
    root = os.environ.get("ICLR26_CACHE")
    if root:
        base = Path(root)
    elif os.environ.get("XDG_CACHE_HOME"):
        base = Path(os.environ["XDG_CACHE_HOME"]) / "iclr26"
    else:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("iclr26"))
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
