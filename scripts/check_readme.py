"""The README's table of papers tells the truth (run by `make lint`).

One row per package (19); each row's "at scale=cpu" cell starts with the counts that the package README's own
claims table gives, written as the CLI prints them: "N/M claims hold" and, when the table has other rows (V1, P1:
checks), ", K/L checks pass". The package table is the first markdown table whose header has `| id |` and a
`holds` column; rows whose id starts with "C" are claims; a holds cell reading "yes" holds.
"""

import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
CELL = re.compile(r"(?<!\\)\|")


def cells(line: str) -> list[str]:
    return [c.strip() for c in CELL.split(line.strip().strip("|"))]


def package_counts(readme: Path) -> str | None:
    lines = readme.read_text().splitlines()
    for i, line in enumerate(lines):
        head = cells(line) if line.startswith("| id |") else []
        holds = next((k for k, c in enumerate(head) if c.lower().startswith("holds")), None)
        if holds is None:
            continue
        rows = []
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            c = cells(row)
            rows.append((c[0], c[holds].strip("*").lower().startswith("yes") if holds < len(c) else False))
        claims = [h for rid, h in rows if rid.startswith("C")]
        checks = [h for rid, h in rows if not rid.startswith("C")]
        text = f"{sum(claims)}/{len(claims)} claims hold"
        return text + (f", {sum(checks)}/{len(checks)} checks pass" if checks else "")
    return None


def main() -> int:
    table = re.findall(r"^\| (\w+) \| .*$", (root / "README.md").read_text(), re.M)
    rows = {}
    for line in (root / "README.md").read_text().splitlines():
        c = cells(line) if line.startswith("| ") else []
        if len(c) >= 4 and re.fullmatch(r"\[`iclr26-[\w-]+`\]\(packages/\w+\)", c[2]):
            rows[c[0]] = c[3]
    present = sorted(p.parent.name for p in (root / "packages").glob("*/pyproject.toml"))
    bad = [f"README: no row for package {s!r}" for s in present if s not in rows]
    bad += [f"README: row {s!r} has no package" for s in rows if s not in present]
    for slug, status in rows.items():
        readme = root / "packages" / slug / "README.md"
        if not readme.is_file():
            continue
        expect = package_counts(readme)
        if expect is None:
            bad.append(f"packages/{slug}/README.md: no claims table (| id | ... | holds |)")
        elif not status.startswith(expect):
            bad.append(f"README row {slug!r}: says {status[:40]!r}, its README's table gives {expect!r}")
    if len(rows) != 19:
        bad.append(f"README: the table of papers has {len(rows)} rows, expected 19 ({len(table)} table lines)")
    print("\n".join(bad) or f"README table ok: {len(rows)} papers, each row's counts = its README's claims table")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
