"""The package imports without torch; the public API resolves lazily."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import iclr26_bof4

SRC = str(Path(iclr26_bof4.__file__).resolve().parents[1])


def test_import_does_not_import_torch():
    code = (
        "import sys, iclr26_bof4, iclr26_bof4.config; from iclr26_bof4 import BOF4Config, CODEBOOK_NAMES; "
        "assert 'torch' not in sys.modules, 'torch imported'; print(iclr26_bof4.__version__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_public_api():
    for name in (
        "codebook",
        "derive_codebook",
        "quantize",
        "dequantize",
        "quantization_error",
        "apply_to_model",
        "Quantized",
        "QuantReport",
        "BOF4Linear",
        "BOF4Config",
        "CODEBOOK_NAMES",
        "__version__",
    ):
        assert name in iclr26_bof4.__all__
        assert getattr(iclr26_bof4, name) is not None
    assert iclr26_bof4.CODEBOOK_NAMES == ("nf4", "af4", "bof4-mse", "bof4-mae", "bof4s-mse", "bof4s-mae")


def _package_imports() -> dict[str, set[str]]:
    """module -> the package modules it imports, at any depth (function-level imports included)."""
    import ast

    pkg = Path(iclr26_bof4.__file__).resolve().parent
    graph: dict[str, set[str]] = {}
    for path in pkg.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(alias.name for alias in node.names)
        graph[path.stem] = deps - {path.stem}
    return graph


def test_no_import_cycles():
    """The maths at the bottom, its users above: the module graph (lazy imports counted) is acyclic."""
    graph = _package_imports()
    assert {"codebooks", "lloyd", "theory", "quantizer", "derive", "blockwise"} <= set(graph)
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*stack, node, dep])
            if dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
