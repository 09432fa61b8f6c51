"""Each workspace member synced alone and its own tests run there: an undeclared dependency fails here.

    python3 scripts/isolation.py [--jobs N] [member-dir ...]      (default: every shared/* and packages/* member)

A member's environment holds exactly what it declares (``uv sync --locked --package <dist> --group dev``): its
dependencies, the core, and the dev tools; not the other members nor their dependencies. The members run in
``--jobs`` lanes at once (default 2: the tests are single-threaded, so two lanes use both cores of a 2-core
machine); each lane has its own environment (``.venv-iso-<k>``, hard links into uv's cache, kept between runs),
so no two syncs touch one environment. The longest members start first (weight: the size of their tests and
sources). It stops starting new members at the first failure and prints each member's output in one piece,
then one line per member: sync seconds, test seconds, result.
"""

from __future__ import annotations

import argparse
import os
import queue
import shlex
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def members() -> list[Path]:
    found = sorted(ROOT.glob("shared/*/pyproject.toml")) + sorted(ROOT.glob("packages/*/pyproject.toml"))
    return [p.parent for p in found]


def dist_name(member: Path) -> str:
    return tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"]


def weight(member: Path) -> int:
    """A proxy for a member's test time: the bytes of its tests and sources."""
    return sum(p.stat().st_size for p in member.rglob("*.py"))


def run_member(
    member: Path, lane: int, uv: list[str], pytest_args: list[str]
) -> tuple[bool, float, float, str]:
    env = dict(os.environ, UV_PROJECT_ENVIRONMENT=str(ROOT / f".venv-iso-{lane}"))
    dist = dist_name(member)
    t0 = time.perf_counter()
    sync = subprocess.run(
        [*uv, "sync", "--quiet", "--locked", "--package", dist, "--group", "dev"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    t_sync = time.perf_counter() - t0
    if sync.returncode != 0:
        return False, t_sync, 0.0, sync.stdout + sync.stderr
    tests = subprocess.run(
        [*uv, "run", "--no-sync", "pytest", str(member.relative_to(ROOT) / "tests"), "-q", *pytest_args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    return tests.returncode == 0, t_sync, time.perf_counter() - t0 - t_sync, tests.stdout + tests.stderr


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=int(os.environ.get("ISOLATION_JOBS", "2")))
    p.add_argument("--uv", default=os.environ.get("UV", "uv"))
    p.add_argument("--pytest-args", default=os.environ.get("PYTEST_ARGS", ""))
    p.add_argument("members", nargs="*", help="member directories (default: all)")
    args = p.parse_args(argv)
    todo = [ROOT / m for m in args.members] if args.members else members()
    todo.sort(key=weight, reverse=True)
    work: queue.Queue[Path] = queue.Queue()
    for m in todo:
        work.put(m)
    failed = threading.Event()
    lock = threading.Lock()
    rows: list[tuple[str, float, float, bool]] = []

    def lane(k: int) -> None:
        while not failed.is_set():
            try:
                member = work.get_nowait()
            except queue.Empty:
                return
            ok, t_sync, t_test, output = run_member(
                member, k, shlex.split(args.uv), shlex.split(args.pytest_args)
            )
            with lock:
                name = dist_name(member)
                print(f"== {name} alone (lane {k}): sync {t_sync:.0f} s, tests {t_test:.0f} s", flush=True)
                print(output.rstrip(), flush=True)
                rows.append((name, t_sync, t_test, ok))
            if not ok:
                failed.set()

    t0 = time.perf_counter()
    lanes = [threading.Thread(target=lane, args=(k,)) for k in range(1, max(1, args.jobs) + 1)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    print(
        f"\nisolation: {len(rows)} of {len(todo)} members in {time.perf_counter() - t0:.0f} s, {args.jobs} lanes"
    )
    for name, t_sync, t_test, ok in sorted(rows):
        print(f"  {name:<28} sync {t_sync:5.1f} s  tests {t_test:6.1f} s  {'ok' if ok else 'FAILED'}")
    if failed.is_set() or len(rows) < len(todo):
        print("isolation: FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
