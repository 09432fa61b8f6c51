"""Check that the README's table of papers matches the packages present (run by `make lint`).

A row says "not yet" exactly when packages/<slug>/ does not exist.
"""

import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
row = r"^\| (\w+) \| .* \| \[?`iclr26-[\w-]+`(?:\]\([^)]*\))? \| (.+) \|$"
rows = re.findall(row, (root / "README.md").read_text(), re.M)
present = {p.parent.name for p in (root / "packages").glob("*/pyproject.toml")}
bad = []
for slug, status in rows:
    built = slug in present
    if built == (status.strip() == "not yet"):
        bad.append(
            f"README: row {slug!r} says {status.strip()!r} but the package is {'present' if built else 'absent'}"
        )
bad += [f"README: no row for package {s!r}" for s in sorted(present - {s for s, _ in rows})]
if len(rows) != 19:
    bad.append(f"README: the table of papers has {len(rows)} rows, expected 19")
print("\n".join(bad) or f"README table ok: {len(present)} of {len(rows)} papers built")
sys.exit(1 if bad else 0)
