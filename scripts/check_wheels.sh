#!/usr/bin/env bash
# Install the built wheels with pip into one fresh venv, as a user would, and run each console script.
#   scripts/check_wheels.sh DIST_DIR [slug ...]
# Third-party dependencies are pre-installed at the locked versions (uv export of exactly the packages
# under test, from uv's cache: no multi-GB torch download per run); pip then installs our wheels and
# checks that their declared requirements are satisfied. Each wheel must hold every file of its source
# package (configs, data). Then, per package, in WHEEL_JOBS parallel lanes (default 2; each run is
# single-threaded): --help, configs list, reproduce scale=smoke from outside the source tree.
set -euo pipefail
# bytecode written as the checks import (Python's default), once for all of them: see the Makefile
unset PYTHONDONTWRITEBYTECODE
dist=${1:?usage: check_wheels.sh DIST_DIR [slug ...]}
shift
dist=$(cd "$dist" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
UV=${UV:-uv}
jobs=${WHEEL_JOBS:-2}
venv=$(mktemp -d)/venv
work=$(mktemp -d)
trap 'rm -rf "$(dirname "$venv")" "$work"' EXIT

t0=$SECONDS
$UV venv --quiet --seed --python 3.11 "$venv"
pkgs=(--package iclr26-core)
wheels=("$dist"/iclr26_core-*.whl)
for slug in "$@"; do
  pkgs+=(--package "iclr26-${slug//_/-}")
  wheels+=("$dist"/iclr26_"${slug}"-*.whl)
done
$UV export --quiet --locked --no-dev --no-emit-workspace --no-hashes "${pkgs[@]}" -o "$work/requirements.txt"
$UV pip install --quiet --python "$venv/bin/python" -r "$work/requirements.txt"
"$venv/bin/python" -m pip install --quiet --compile --disable-pip-version-check "${wheels[@]}"
"$venv/bin/python" -m pip check
echo "wheels: venv with ${#wheels[@]} wheels in $((SECONDS - t0)) s"

# every file of a source package is in its wheel (a config or data file left out breaks the installed CLI)
python3 - "$root" "$dist" iclr26_core:shared/core "$@" <<'PY'
import sys, zipfile
from pathlib import Path

root, dist = Path(sys.argv[1]), Path(sys.argv[2])
bad = []
for arg in sys.argv[3:]:
    mod, _, where = arg.partition(":")
    mod = mod if where else f"iclr26_{arg}"
    src = root / (where or f"packages/{arg}") / "src" / mod
    (wheel,) = dist.glob(f"{mod}-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in src.rglob("*"):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
            rel = f.relative_to(src.parent).as_posix()
            if rel not in names:
                bad.append(f"{wheel.name}: missing {rel}")
print("\n".join(bad) or f"wheels hold every source file: {len(sys.argv) - 3} packages")
sys.exit(1 if bad else 0)
PY

export HF_HUB_OFFLINE=1 ICLR26_PROGRESS=0 ICLR26_CACHE="$work/cache" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
cd "$work"  # not the source tree: the installed wheels must be what runs
"$venv/bin/iclr26" --help >/dev/null
"$venv/bin/iclr26" list

check_one() {  # venv work slug: the console script of one wheel; prints wall and CPU (user+sys) seconds
  local venv=$1 work=$2 slug=$3 TIMEFORMAT="%0R s, CPU %0U+%0S s"
  local script="$venv/bin/iclr26-${slug//_/-}" log="$work/$slug.log"
  { time {
    "$script" --help >/dev/null &&
      "$script" configs list >/dev/null &&
      "$script" reproduce scale=smoke "out=$work/runs/$slug" >/dev/null &&
      test -s "$work/runs/$slug/report.md" && test -s "$work/runs/$slug/metrics.json" &&
      "$venv/bin/python" -c "import iclr26_${slug}.conf, importlib.resources as r; \
assert r.files('iclr26_${slug}.conf').joinpath('scale/smoke.yaml').is_file()"
  } >"$log" 2>&1; } 2>"$log.time" || { echo "== wheel: iclr26-${slug//_/-} FAILED"; cat "$log"; return 1; }
  echo "== wheel: iclr26-${slug//_/-} ok ($(cat "$log.time"))"
}
export -f check_one
printf '%s\n' "$@" | xargs -r -P "$jobs" -I{} bash -c 'check_one "$@"' _ "$venv" "$work" {}
times >"$work/times"  # this shell's children: every step above (a subshell's `times` would be empty)
echo "wheels ok: iclr26-core $* ($((SECONDS - t0)) s wall; CPU user sys $(tail -1 "$work/times"); loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
