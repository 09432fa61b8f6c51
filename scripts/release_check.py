"""Dry run of a release (``make release``): what `uv publish` would upload, and whether it is fit to.

    python scripts/release_check.py DIST_DIR

Checks, for every workspace member (found by glob, so a new package is included without editing this file):
a wheel and an sdist of its current version are in DIST_DIR; ``twine check`` passes on them (metadata and the
README render on PyPI); its CHANGELOG.md has a heading for that version; every ``iclr26-*`` requirement it
declares admits the version of that member being released (a package pinned ``iclr26-core<0.2`` cannot ship
next to core 0.2). Prints the upload order (the core first) and the command. Uploads nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    dist = Path(argv[0] if argv else "dist")
    members = sorted(ROOT.glob("shared/*/pyproject.toml")) + sorted(ROOT.glob("packages/*/pyproject.toml"))
    projects = {}
    for pp in members:
        meta = tomllib.loads(pp.read_text())["project"]
        projects[meta["name"]] = (pp.parent, meta)
    versions = {name: Version(meta["version"]) for name, (_, meta) in projects.items()}
    bad, files = [], []
    for name, (where, meta) in projects.items():
        stem = name.replace("-", "_")
        version = meta["version"]
        wheel = list(dist.glob(f"{stem}-{version}-*.whl"))
        sdist = list(dist.glob(f"{stem}-{version}.tar.gz"))
        if not wheel or not sdist:
            bad.append(f"{name} {version}: wheel or sdist missing in {dist}/ (make build)")
        files += wheel + sdist
        changelog = where / "CHANGELOG.md"
        if not changelog.is_file() or not re.search(
            rf"^##\s+\[?{re.escape(version)}\b", changelog.read_text(), re.M
        ):
            bad.append(f"{name} {version}: no '## {version}' heading in {changelog.relative_to(ROOT)}")
        for raw in meta.get("dependencies", []):
            req = Requirement(raw)
            if req.name in versions and not req.specifier.contains(versions[req.name], prereleases=True):
                bad.append(
                    f"{name} {version}: requires {req}, but {req.name} {versions[req.name]} is released"
                )
    if files:
        check = subprocess.run(
            [sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            bad.append("twine check failed:\n" + check.stdout + check.stderr)
    order = ["iclr26-core", *sorted(n for n in projects if n != "iclr26-core")]
    print(f"release dry run: {len(projects)} distributions, {len(files)} files in {dist}/")
    for name in order:
        print(f"  {name:<28} {versions[name]}")
    if bad:
        print("\n".join(["", "not ready:", *bad]))
        return 1
    print(
        f"\nready: upload the core first, then the papers:\n  uv publish {dist}/iclr26_core-*\n"
        f"  uv publish --check-url https://pypi.org/simple/ {dist}/*"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
