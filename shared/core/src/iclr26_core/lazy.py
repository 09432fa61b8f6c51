"""Lazy public APIs for paper packages: ``import iclr26_<slug>`` must not import torch (fast ``--help``).

In a package's ``__init__.py``, one statement::

    from iclr26_core.lazy import lazy_package

    __version__, __all__, __getattr__, __dir__ = lazy_package(
        __name__,
        "iclr26-mypaper",
        {"quantizer": "quantize dequantize Quantized", "config": "MyConfig"},  # submodule -> its public names
    )

or the same in parts::

    __version__ = package_version("iclr26-mypaper")
    _EXPORTS = {"quantize": "quantizer", "Quantized": "quantizer"}   # public name -> submodule
    __all__ = ["__version__", *_EXPORTS]
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

A name is imported from its submodule on first access (PEP 562) and cached in the package namespace.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def package_version(dist: str, default: str = "0.0.0") -> str:
    """The installed version of distribution ``dist``; ``default`` when running from a source tree."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return default


def lazy_exports(
    module_name: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for package ``module_name`` whose public names live in ``exports``."""

    def __getattr__(name: str) -> Any:
        sub = exports.get(name)
        if sub is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(import_module(f".{sub}", module_name), name)
        setattr(sys.modules[module_name], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(exports))

    return __getattr__, __dir__


def lazy_package(
    module_name: str, dist: str, by_module: dict[str, str | list[str]]
) -> tuple[str, list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__version__, __all__, __getattr__, __dir__)`` of a package whose public names are listed per submodule
    (``{"quantizer": "quantize dequantize"}``: names separated by spaces, or a list); ``__all__`` keeps that order."""
    exports: dict[str, str] = {}
    for sub, names in by_module.items():
        for name in names.split() if isinstance(names, str) else names:
            if name in exports:
                raise ValueError(f"{module_name}: {name!r} is exported from both {exports[name]} and {sub}")
            exports[name] = sub
    return (package_version(dist), ["__version__", *exports], *lazy_exports(module_name, exports))
