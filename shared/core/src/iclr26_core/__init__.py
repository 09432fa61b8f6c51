"""iclr26-core: the small shared core of the iclr26 paper packages.

Nothing here imports torch at import time; import the submodules you need
(``iclr26_core.models``, ``iclr26_core.train`` ...).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("iclr26-core")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
