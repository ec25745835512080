#!/usr/bin/env bash
# tools/remote_cache_test.sh: proves action results are shared across clones
# through a real remote cache (--config=remote).
#
# Starts nginx (Debian's package, installed with apt-get if missing; its
# built-in DAV module serves Bazel's HTTP cache protocol: GET and PUT) on
# 127.0.0.1 with a private configuration, then:
#   A. clones this checkout's HEAD into one temporary path and builds TARGETS
#      there with an empty output base, no disk cache and --config=remote:
#      every action runs and its result is uploaded;
#   B. clones HEAD again into another path (of another length) and builds the
#      same targets with a second empty output base, no disk cache and
#      --config=remote;
# and checks, from build B's process summary ("N processes: X remote cache
# hit, Y internal, ..."), that at least 95% of the cacheable actions (all but
# Bazel's internal ones, which never reach a cache) were remote cache hits.
# Prints the hit rate. nginx, the Bazel servers and the temporary trees are
# removed at the end whatever happens. On a miss, both builds' execution logs
# are kept (and the missed actions listed) for comparison.
#
#   tools/remote_cache_test.sh [extra bazel build flags, e.g. --config=rocm]
#
# Environment: REMOTE_CACHE_TEST_TARGETS (default //...),
# REMOTE_CACHE_TEST_MIN_HIT_PERCENT (default 95), STABLEOPS_CACHE_DIR as for
# tools/bazel (the output bases live under it: tools/bazel mounts it).
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$workspace"
targets=${REMOTE_CACHE_TEST_TARGETS:-//...}
min_percent=${REMOTE_CACHE_TEST_MIN_HIT_PERCENT:-95}
cache=${STABLEOPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stableops}
mkdir -p "$cache/bazel"

say() { printf 'remote_cache_test: %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
# shellcheck source=tools/nginx_cache.sh
source "$workspace/tools/nginx_cache.sh"

# --- nginx -----------------------------------------------------------------
if ! command -v nginx >/dev/null; then
  [[ $EUID -eq 0 ]] || fail "nginx is not installed and installing it needs root (apt-get install nginx)"
  say "installing nginx from Debian (apt-get install nginx)"
  # Keep the package's own service from starting (we run a private instance).
  own_policy=
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      -o DPkg::Lock::Timeout=600 --no-install-recommends nginx; } >&2 || install_failed=1
  [[ -n $own_policy ]] && rm -f /usr/sbin/policy-rc.d
  [[ -z ${install_failed:-} ]] || fail "apt-get install nginx failed (see above)"
fi
nginx -V 2>&1 | grep -q -- --with-http_dav_module ||
  fail "this nginx lacks the DAV module (--with-http_dav_module); Debian's 'nginx' package has it"

scratch=$(mktemp -d "$cache/bazel/rc-test.XXXXXX")
clones=$(mktemp -d /tmp/stableops-rc-test.XXXXXX)
nginx_pid=
bases=()
keep_logs=

# shellcheck disable=SC2329  # run by the EXIT trap below
cleanup() {
  set +e
  if [[ -n $nginx_pid ]]; then
    kill "$nginx_pid" 2>/dev/null
    wait "$nginx_pid" 2>/dev/null
  fi
  local i
  for i in "${!bases[@]}"; do
    (cd "${clones_dirs[$i]}" && ./tools/bazel --output_base="${bases[$i]}" shutdown >/dev/null 2>&1)
  done
  if [[ -n $keep_logs ]]; then
    local keep="$cache/bazel/remote-cache-test-logs"
    rm -rf "$keep" && mkdir -p "$keep" && cp "$scratch"/*.log "$scratch"/*.json "$keep"/ 2>/dev/null
    say "execution logs and build output kept in $keep"
  fi
  rm -rf "$scratch" "$clones"
  # tools/bazel's rc for this run's URL (one per URL; the port was random).
  [[ -n ${url:-} ]] && rm -f "$cache/bazel/image.remote-$(printf '%s' "$url" | sha256sum | cut -c1-12).bazelrc"
}
trap cleanup EXIT
clones_dirs=()

start_nginx_cache "$scratch/nginx"
say "nginx (pid $nginx_pid) serving a remote cache at $url"

# --- the two builds --------------------------------------------------------
head=$(git rev-parse HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  say "note: uncommitted changes are not tested; the clones are of HEAD ($head)"

build() {  # build NAME CLONE_DIR: clones, builds, leaves its stderr in $scratch/NAME.log
  local name=$1 dir=$2 base="$scratch/$1"
  git clone -q --no-hardlinks "$workspace" "$dir"
  git -C "$dir" checkout -q --detach "$head"
  clones_dirs+=("$dir")
  bases+=("$base")
  local start=$SECONDS
  say "build $name in $dir (output base $base): bazel build $targets --config=remote --disk_cache= ${*:3}"
  (cd "$dir" && STABLEOPS_REMOTE_CACHE=$url ./tools/bazel --output_base="$base" build "$targets" \
    --config=remote --disk_cache= --symlink_prefix=/ --color=no --curses=no \
    --execution_log_json_file="$scratch/$name.exec.json" "${@:3}") 2>"$scratch/$name.log" ||
    { keep_logs=1; tail -n 30 "$scratch/$name.log" >&2; fail "build $name failed"; }
  say "build $name took $((SECONDS - start)) s: $(grep -E '^INFO: [0-9]+ processes' "$scratch/$name.log" | tail -n1)"
}

total_start=$SECONDS
build A "$clones/a" "$@"
build B "$clones/clone-b" "$@"

# "INFO: 40 processes: 35 remote cache hit, 5 internal." (counts per kind)
summary=$(grep -E '^INFO: [0-9]+ processes' "$scratch/B.log" | tail -n1)
read -r total hits internal < <(python3 "$workspace/tools/exec_log.py" summary "$scratch/B.log")
cacheable=$((total - internal))
((cacheable > 0)) || fail "build B ran no cacheable action ($summary)"
percent=$(python3 -c "print(f'{100 * $hits / $cacheable:.1f}')")
say "build B: $hits of $cacheable cacheable actions were remote cache hits: ${percent}% (${summary#INFO: })"
echo "remote cache hit rate: ${percent}% ($hits/$cacheable), $((SECONDS - total_start)) s in all"
if python3 -c "import sys; sys.exit(0 if $hits * 100 >= $min_percent * $cacheable else 1)"; then
  say "OK: at least ${min_percent}% remote cache hits across clones"
  exit 0
fi
keep_logs=1
say "actions of build B that were not remote cache hits (from its execution log):"
python3 "$workspace/tools/exec_log.py" ran "$scratch/B.exec.json" --limit=40 >&2 || true
say "compare the inputs and arguments of the same outputs in A.exec.json and B.exec.json"
fail "only ${percent}% remote cache hits (need ${min_percent}%)"
