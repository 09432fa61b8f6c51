"""The layout contract of a paper package (the README's "Adding a paper"), checked on the files alone.

    python3 scripts/conformance.py [slug ...]      (default: every packages/<slug>)

Nothing is imported or run. Each shortfall is one line; exit 1 when there is any. `make lint` runs it.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALES = ("smoke", "cpu", "paper")


def shortfalls(pkg: Path) -> list[str]:
    slug = pkg.name
    dist, module = "iclr26-" + slug.replace("_", "-"), "iclr26_" + slug
    out: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            out.append(f"{slug}: {what}")

    if not (pkg / "pyproject.toml").is_file():
        return [f"{slug}: no pyproject.toml"]
    project = tomllib.loads((pkg / "pyproject.toml").read_text()).get("project", {})
    need(project.get("name") == dist, f"[project].name must be {dist!r}, is {project.get('name')!r}")
    need(bool(project.get("version")), "[project] has no version")
    need(
        any(d.startswith("iclr26-core") for d in project.get("dependencies", [])), "no iclr26-core dependency"
    )
    need(
        project.get("scripts", {}).get(dist) == f"{module}.cli:main",
        f"console script {dist} != {module}.cli:main",
    )
    need(
        project.get("entry-points", {}).get("iclr26.papers", {}).get(slug) == f"{module}.cli:app",
        f"entry point iclr26.papers:{slug} != {module}.cli:app",
    )
    src = pkg / "src" / module
    for name in ("__init__.py", "__main__.py", "cli.py", "conf/reproduce.yaml"):
        need((src / name).is_file(), f"no src/{module}/{name}")
    for scale in SCALES:
        path = src / "conf" / "scale" / f"{scale}.yaml"
        need(path.is_file(), f"no conf/scale/{scale}.yaml")
    for path in sorted((src / "conf" / "scale").glob("*.yaml")):
        first = path.read_text().lstrip().splitlines()[:1]
        need(
            first == ["# @package _global_"],
            f"conf/scale/{path.name} does not start with '# @package _global_'",
        )
    tests = sorted((pkg / "tests").glob("test_*.py"))
    need(bool(tests), "no tests/test_*.py")
    need((pkg / "CHANGELOG.md").is_file(), "no CHANGELOG.md")
    readme = (pkg / "README.md").read_text() if (pkg / "README.md").is_file() else ""
    need(bool(readme), "no README.md")
    need("| id |" in readme or "| claim |" in readme, "README.md has no claims table")
    if (src / "conf" / "scale" / "real.yaml").is_file():
        need(
            "On a real model" in readme, "conf/scale/real.yaml but no 'On a real model' section in README.md"
        )
    for path in sorted(src.rglob("*.py")):
        lines = path.read_text().count("\n")
        need(lines <= 600, f"{path.relative_to(pkg)} has {lines} lines (split it: ~400 is the guide)")
    return out


def main(argv: list[str]) -> int:
    slugs = argv or sorted(p.name for p in (ROOT / "packages").iterdir() if p.is_dir())
    problems = [line for slug in slugs for line in shortfalls(ROOT / "packages" / slug)]
    print(
        "\n".join(problems) if problems else f"conformance: {len(slugs)} packages follow the layout contract"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
