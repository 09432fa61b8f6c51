"""Each workspace member synced alone and its own tests run there: an undeclared dependency fails here.

    python3 scripts/isolation.py [--jobs N] [member-dir ...]      (default: every shared/* and packages/* member)

A member's environment holds exactly what it declares (``uv sync --locked --package <dist> --no-default-groups
--group test --extra peers [--extra real]``): its dependencies, its own peers (and the core's real models), the core
and the test tools; not the dev group's libraries, nor the other members or their dependencies. The members run in
``--jobs`` lanes at once (default 2: the tests are single-threaded, so two lanes use both cores of a 2-core
machine); each lane has its own environment (``.venv-iso-<k>``, hard links into uv's cache, kept between runs),
so no two syncs touch one environment. The longest members start first (weight: the size of their tests and
sources). It stops starting new members at the first failure and prints each member's output in one piece,
then one line per member: sync and test seconds, wall and CPU (user+sys, the member's own), result.
"""

from __future__ import annotations

import argparse
import os
import queue
import shlex
import subprocess
import sys
import tempfile
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


def own_extras(member: Path) -> list[str]:
    """The member's own optional extras that its tests may use: ``peers`` (the libraries it is compared with)
    and ``real`` (the core's real models and data); others (e.g. cave's ``mesh``) stay out."""
    extras = tomllib.loads((member / "pyproject.toml").read_text())["project"].get(
        "optional-dependencies", {}
    )
    return [e for e in ("peers", "real") if e in extras]


def weight(member: Path) -> int:
    """A proxy for a member's test time: the bytes of its tests and sources."""
    return sum(p.stat().st_size for p in member.rglob("*.py"))


def timed(cmd: list[str], env: dict[str, str]) -> tuple[int, str, float, float]:
    """Run ``cmd`` in the workspace root: (exit status, output, wall seconds, CPU seconds user+sys).

    The CPU time is the child's and its descendants' (``os.wait4``), so it is this member's alone even while
    the other lane runs: on a loaded machine it is the proxy for the time on an idle one.
    """
    t0 = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return proc.returncode, out.read(), time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def run_member(member: Path, lane: int, uv: list[str], pytest_args: list[str]) -> dict:
    env = dict(os.environ, UV_PROJECT_ENVIRONMENT=str(ROOT / f".venv-iso-{lane}"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # see the Makefile: bytecode written once per environment
    env.pop("VIRTUAL_ENV", None)  # the lane's environment, not the one `uv run` may have activated
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    extras = [f"--extra={e}" for e in own_extras(member)]
    sync = [*uv, "sync", "--quiet", "--locked", "--package", dist_name(member), "--no-default-groups"]
    sync += ["--group", "test", *extras]
    rc, output, wall, cpu = timed(sync, env)
    row = {"sync": wall, "sync_cpu": cpu, "tests": 0.0, "tests_cpu": 0.0, "ok": rc == 0, "output": output}
    if rc == 0:
        tests = [
            *uv,
            "run",
            "--no-sync",
            "pytest",
            str(member.relative_to(ROOT) / "tests"),
            "-q",
            *pytest_args,
        ]
        rc, output, wall, cpu = timed(tests, env)
        row.update(tests=wall, tests_cpu=cpu, ok=rc == 0, output=output)
    return row


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
    rows: list[tuple[str, dict]] = []

    def lane(k: int) -> None:
        while not failed.is_set():
            try:
                member = work.get_nowait()
            except queue.Empty:
                return
            row = run_member(member, k, shlex.split(args.uv), shlex.split(args.pytest_args))
            with lock:
                name = dist_name(member)
                print(
                    f"== {name} alone (lane {k}): sync {row['sync']:.0f} s, tests {row['tests']:.0f} s"
                    f" (CPU {row['sync_cpu'] + row['tests_cpu']:.0f} s)",
                    flush=True,
                )
                print(row["output"].rstrip(), flush=True)
                rows.append((name, row))
            if not row["ok"]:
                failed.set()

    t0 = time.perf_counter()
    lanes = [threading.Thread(target=lane, args=(k,)) for k in range(1, max(1, args.jobs) + 1)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    wall = time.perf_counter() - t0
    cpu = sum(r["sync_cpu"] + r["tests_cpu"] for _, r in rows)
    print(
        f"\nisolation: {len(rows)} of {len(todo)} members in {wall:.0f} s wall, {args.jobs} lanes;"
        f" CPU user+sys {cpu:.0f} s; loadavg {Path('/proc/loadavg').read_text().split()[0]}"
    )
    print(f"  {'member':<28} {'sync s':>7} {'CPU':>6} {'tests s':>8} {'CPU':>6}")
    for name, r in sorted(rows):
        print(
            f"  {name:<28} {r['sync']:7.1f} {r['sync_cpu']:6.1f} {r['tests']:8.1f} {r['tests_cpu']:6.1f}"
            f"  {'ok' if r['ok'] else 'FAILED'}"
        )
    if failed.is_set() or len(rows) < len(todo):
        print("isolation: FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
