"""The lazy public-API helper every paper package's __init__ uses."""

import sys
import types

import pytest

from iclr26_core.lazy import lazy_exports, lazy_package, package_version
from iclr26_core.testing import imports_torch


def test_lazy_exports_imports_on_first_access_and_caches(monkeypatch):
    pkg = types.ModuleType("lazy_pkg")
    pkg.__path__ = []  # a package
    sub = types.ModuleType("lazy_pkg.maths")
    sub.square = lambda x: x * x
    monkeypatch.setitem(sys.modules, "lazy_pkg", pkg)
    monkeypatch.setitem(sys.modules, "lazy_pkg.maths", sub)
    pkg.__getattr__, pkg.__dir__ = lazy_exports("lazy_pkg", {"square": "maths"})
    assert "square" not in vars(pkg)
    assert pkg.square(3) == 9  # resolved through __getattr__ ...
    assert vars(pkg)["square"] is sub.square  # ... and cached in the package namespace
    assert "square" in pkg.__dir__()
    with pytest.raises(AttributeError, match="no attribute 'cube'"):
        pkg.cube  # noqa: B018


def test_package_version():
    assert package_version("iclr26-core") != "0.0.0"
    assert package_version("no-such-distribution-xyz", default="9") == "9"


def test_importing_the_core_does_not_import_torch():
    assert imports_torch("import iclr26_core, iclr26_core.lazy, iclr26_core.cli") is False


def test_lazy_package_lists_names_per_submodule(monkeypatch):
    pkg = types.ModuleType("lazy_pkg2")
    pkg.__path__ = []
    sub = types.ModuleType("lazy_pkg2.maths")
    sub.square, sub.cube = (lambda x: x * x), (lambda x: x**3)
    monkeypatch.setitem(sys.modules, "lazy_pkg2", pkg)
    monkeypatch.setitem(sys.modules, "lazy_pkg2.maths", sub)
    version, names, pkg.__getattr__, pkg.__dir__ = lazy_package(
        "lazy_pkg2", "iclr26-core", {"maths": "square cube", "other": ["Thing"]}
    )
    assert version == package_version("iclr26-core") and names == ["__version__", "square", "cube", "Thing"]
    assert pkg.cube(2) == 8 and "Thing" in pkg.__dir__()
    with pytest.raises(ValueError, match="exported from both"):
        lazy_package("lazy_pkg2", "iclr26-core", {"maths": "square", "other": "square"})
