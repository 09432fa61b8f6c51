"""No import cycles inside a package: the maths at the bottom, its users above it (issue 57).

Reads every module of ``shared/core/src/iclr26_core`` and ``packages/*/src/iclr26_*`` with ``ast`` (nothing is
imported), takes each intra-package import — at module level or inside a function, ``from .x import y`` or
``from iclr26_<slug>.x import y`` — as an edge, and prints every strongly connected component of more than one
module. Exit 1 when there is one. ``python3 scripts/check_imports.py [package dirs ...]``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules(pkg_dir: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        rel = path.relative_to(pkg_dir).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        out[".".join(parts)] = path
    return out


def _edges(name: str, path: Path, package: str, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if name else []
    base = here if is_pkg else here[:-1]
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join([*anchor, *(node.module.split(".") if node.module else [])])
            elif node.module and (node.module == package or node.module.startswith(package + ".")):
                mod = node.module[len(package) + 1 :]
            else:
                continue
            targets.append(mod)
            targets += [f"{mod}.{a.name}".strip(".") for a in node.names]
        elif isinstance(node, ast.Import):
            targets += [a.name[len(package) + 1 :] for a in node.names if a.name.startswith(package + ".")]
        for t in targets:
            if t in modules and t != name and t != "":
                found.add(t)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def check(pkg_dir: Path) -> list[list[str]]:
    package = pkg_dir.name
    modules = _modules(pkg_dir)
    # a package's __init__ re-exports its modules (lazily): it is the top, not part of a cycle
    graph = {m: _edges(m, p, package, modules) - {""} for m, p in modules.items() if m}
    return _cycles(graph)


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv] or [ROOT / "shared/core", *sorted((ROOT / "packages").iterdir())]
    bad = 0
    for d in dirs:
        for pkg_dir in sorted((d / "src").glob("iclr26_*")):
            for comp in check(pkg_dir):
                print(f"{pkg_dir.name}: import cycle {' <-> '.join(comp)}")
                bad += 1
    if not bad:
        print(f"no import cycles in {len(dirs)} packages")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
