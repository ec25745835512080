#!/usr/bin/env bash
# tools/check_reproducible_wheel.sh: proves //python:wheel is byte-reproducible.
#
# Builds the wheel twice, each time in a fresh, empty Bazel output base with
# no disk cache and no remote cache (the repository cache, which holds only
# downloaded archives by content hash, is kept), and compares the two wheels'
# sha256. Prints both; exits 1 if they differ (after listing the entries that
# differ), 0 if they are identical.
#
#   tools/check_reproducible_wheel.sh [extra bazel build flags, e.g. --config=rocm]
#
# Both builds compile everything from scratch (nvcc included), so this takes
# a while: see the timing it prints. The output bases live under the
# directory tools/bazel mounts into the build image (STABLEOPS_CACHE_DIR,
# default ~/.cache/stableops) and are removed afterwards.
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$workspace"
cache=${STABLEOPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stableops}
mkdir -p "$cache/bazel"
scratch=$(mktemp -d "$cache/bazel/repro.XXXXXX")
bases=()

cleanup() {
  for base in "${bases[@]}"; do
    ./tools/bazel --output_base="$base" shutdown >/dev/null 2>&1 || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT

build() {  # build N: builds into $scratch/N, prints the wheel's path
  local base="$scratch/$1"
  bases+=("$base")
  local start=$SECONDS
  # --symlink_prefix=/: leave the workspace's bazel-* links alone.
  ./tools/bazel --output_base="$base" build //python:wheel \
    --disk_cache= --remote_cache= --symlink_prefix=/ "${@:2}" >&2
  echo "check_reproducible_wheel: build $1 took $((SECONDS - start)) s" >&2
  local wheels=("$base"/execroot/_main/bazel-out/*/bin/python/stableops-*.whl)
  [[ ${#wheels[@]} -eq 1 && -f ${wheels[0]} ]] || { echo "check_reproducible_wheel: expected one wheel, found: ${wheels[*]}" >&2; exit 2; }
  cp "${wheels[0]}" "$scratch/wheel$1.whl"
  echo "$scratch/wheel$1.whl"
}

start=$SECONDS
first=$(build 1 "$@")
second=$(build 2 "$@")
name=$(basename "$(ls "$scratch"/1/execroot/_main/bazel-out/*/bin/python/stableops-*.whl)")
sum1=$(sha256sum "$first" | cut -d' ' -f1)
sum2=$(sha256sum "$second" | cut -d' ' -f1)
echo "build 1: $sum1  $name"
echo "build 2: $sum2  $name"
echo "check_reproducible_wheel: $((SECONDS - start)) s in all"
if [[ $sum1 != "$sum2" ]]; then
  echo "check_reproducible_wheel: FAILED: the two wheels differ; entries with different contents:" >&2
  python3 - "$first" "$second" >&2 <<'PY' || true
import hashlib, sys, zipfile
a, b = (zipfile.ZipFile(p) for p in sys.argv[1:3])
na, nb = set(a.namelist()), set(b.namelist())
for n in sorted(na ^ nb):
    print("  only in one wheel:", n)
for n in sorted(na & nb):
    if a.read(n) != b.read(n):
        print("  differs:", n)
    elif a.getinfo(n).date_time != b.getinfo(n).date_time or a.getinfo(n).external_attr != b.getinfo(n).external_attr:
        print("  zip header differs:", n)
PY
  keep="$cache/bazel/repro-mismatch"
  rm -rf "$keep" && mkdir -p "$keep" && cp "$first" "$keep/wheel1.whl" && cp "$second" "$keep/wheel2.whl"
  echo "check_reproducible_wheel: both wheels kept in $keep for diffoscope / cmp" >&2
  exit 1
fi
echo "check_reproducible_wheel: OK, byte-identical"
