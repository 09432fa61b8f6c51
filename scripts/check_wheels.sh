#!/usr/bin/env bash
# Install the built wheels with pip into a fresh venv, as a user would, and run each console script.
#   scripts/check_wheels.sh DIST_DIR [slug ...]
# Third-party dependencies are pre-installed at the locked versions (uv export of exactly the packages
# under test, from uv's cache: no multi-GB torch download per run); pip then installs our wheels and
# checks that their declared requirements are satisfied.
set -euo pipefail
dist=${1:?usage: check_wheels.sh DIST_DIR [slug ...]}
shift
UV=${UV:-uv}
venv=$(mktemp -d)/venv
work=$(mktemp -d)
trap 'rm -rf "$(dirname "$venv")" "$work"' EXIT

"$UV" venv --quiet --seed --python 3.11 "$venv"
pkgs=(--package iclr26-core)
wheels=("$dist"/iclr26_core-*.whl)
for slug in "$@"; do
  pkgs+=(--package "iclr26-${slug//_/-}")
  wheels+=("$dist"/iclr26_"${slug}"-*.whl)
done
"$UV" export --quiet --locked --no-dev --no-emit-workspace --no-hashes "${pkgs[@]}" -o "$work/requirements.txt"
"$UV" pip install --quiet --python "$venv/bin/python" -r "$work/requirements.txt"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${wheels[@]}"
"$venv/bin/python" -m pip check

export HF_HUB_OFFLINE=1 ICLR26_PROGRESS=0 ICLR26_CACHE="$work/cache"
cd "$work"  # not the source tree: the installed wheels must be what runs
"$venv/bin/iclr26" --help >/dev/null
"$venv/bin/iclr26" list
for slug in "$@"; do
  script="$venv/bin/iclr26-${slug//_/-}"
  echo "== wheel: iclr26-${slug//_/-}"
  "$script" --help >/dev/null
  "$script" configs list >/dev/null
  "$script" reproduce scale=smoke "out=$work/runs/$slug" >/dev/null
  test -s "$work/runs/$slug/report.md" && test -s "$work/runs/$slug/metrics.json"
  "$venv/bin/python" -c "import iclr26_${slug}.conf, importlib.resources as r; \
assert r.files('iclr26_${slug}.conf').joinpath('scale/smoke.yaml').is_file()"
done
echo "wheels ok: iclr26-core $*"
