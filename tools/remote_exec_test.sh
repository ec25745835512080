#!/usr/bin/env bash
# tools/remote_exec_test.sh: proves stableops builds and tests on a real
# remote-execution engine with --config=rbe (BuildGrid + buildbox workers,
# started by tools/rbe/engine.sh on 127.0.0.1 inside the build image), and
# what happens when a worker dies or the server restarts mid-build.
#
#   tools/remote_exec_test.sh [extra bazel flags for every build]
#
# Steps, each timed (the timings are printed at the end):
#   E. starts the engine: PostgreSQL, BuildGrid and REMOTE_EXEC_TEST_WORKERS
#      (default 2) workers, on free loopback ports.
#   A. clones HEAD and, from an empty output base with no disk cache and
#      --noremote_accept_cached (every action executes; none is answered from
#      the action cache), runs with --config=rbe:
#        bazel build //python:wheel
#        bazel test //tests:all
#        bazel test //tests:all --config=rocm     (the HIP toolchain)
#      and checks, from the execution logs, that every spawn ran remotely but
#      the tests that must stay local (//tests:lint and
#      //tests:test_target_version_module, tagged local/no-remote by design;
#      the GPU tests, no-remote through stable_py_test), that every test
#      passed and that each worker completed jobs (BuildGrid's job table).
#   L. builds //python:wheel locally (no remote, no disk cache, an empty
#      output base): its sha256 must equal the remotely built wheel's.
#   B. clones HEAD again at another path and runs A's two CUDA commands from
#      an empty output base with no disk cache (remote cache allowed): at
#      least REMOTE_EXEC_TEST_MIN_HIT_PERCENT (default 95) of the spawns that
#      may use the remote cache must be remote cache hits.
#   F1. a worker killed (SIGKILL: buildbox-worker, its casd, its action)
#      while it runs an action of a build (empty output base,
#      --noremote_accept_cached): the build must finish, with the same wheel.
#      The worker is started again afterwards.
#   F2. BuildGrid stopped while a build runs and started again 5 s later on
#      the same port, database and CAS: the build must finish or fail with a
#      clear message (which one is printed); then the same build again must
#      succeed with the same wheel, and every blob in the server's CAS and in
#      the workers' casd stores must hash to its name.
# REMOTE_EXEC_TEST_FAULTS=0 skips F1 and F2.
#
# The engine, the Bazel servers, the clones and output bases are removed at
# exit whatever happens; on a failure the logs (Bazel's, the execution logs,
# the engine's) are kept under <cache>/bazel/remote-exec-test-logs.
#
# Environment: REMOTE_EXEC_TEST_WORKERS (2), REMOTE_EXEC_TEST_MIN_HIT_PERCENT
# (95), REMOTE_EXEC_TEST_FAULTS (1), STABLEOPS_CACHE_DIR as for tools/bazel.
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$workspace"
workers=${REMOTE_EXEC_TEST_WORKERS:-2}
min_percent=${REMOTE_EXEC_TEST_MIN_HIT_PERCENT:-95}
faults=${REMOTE_EXEC_TEST_FAULTS:-1}
cache=${STABLEOPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stableops}
mkdir -p "$cache/bazel"

say() { printf 'remote_exec_test: %s\n' "$*" >&2; }
fail() {
  say "FAILED: $*"
  # (A file, not a variable: fail may run in a command substitution.)
  touch "$scratch/.failed" 2>/dev/null || true
  exit 1
}
[[ $workers =~ ^[2-9]$ ]] || { say "FAILED: REMOTE_EXEC_TEST_WORKERS must be 2 to 9 (the test needs two workers to run actions), found '$workers'"; exit 1; }

# Spawns allowed to run on this machine: the two tests that are local by
# design and the GPU tests (their generated per-runtime targets).
local_ok='(@@)?//tests:(lint|test_target_version_module|test_(cuda|rocm)_ops_torch[0-9_]+)'

scratch=$(mktemp -d "$cache/bazel/rexec-test.XXXXXX")
clones=$(mktemp -d /tmp/stableops-rexec-test.XXXXXX)
engine=rexec-$$
engine_started=
bases=()
base_dirs=()
timings=()

# kill_tree PID: SIGTERM to PID and every process below it (a Bazel client
# runs a few levels down: subshell, tools/bazel, the image's namespace).
kill_tree() {
  local pids=("$1") i=0 kids
  while ((i < ${#pids[@]})); do
    kids=$(ps -o pid= --ppid "${pids[$i]}" 2>/dev/null) || true
    # shellcheck disable=SC2206  # one pid per word
    pids+=($kids)
    i=$((i + 1))
  done
  kill -TERM "${pids[@]}" 2>/dev/null || true
}

# shellcheck disable=SC2329  # run by the EXIT trap below
cleanup() {
  local rc=$? i run pid
  set +e
  trap - EXIT INT TERM
  # A build still running (the script was interrupted): its client first, so
  # that the shutdowns below and the engine's stop do not wait on it.
  for pid in $(jobs -p); do kill_tree "$pid"; done
  run=$(cat "$cache/rbe/$engine" 2>/dev/null)
  if ((rc != 0)) || [[ -e $scratch/.failed ]]; then
    local keep="$cache/bazel/remote-exec-test-logs"
    rm -rf "$keep" && mkdir -p "$keep/engine"
    cp "$scratch"/*.log "$scratch"/*.json "$scratch"/*.whl "$keep"/ 2>/dev/null
    [[ -n $run ]] && cp -r "$run/logs/." "$keep/engine/" 2>/dev/null
    say "logs kept in $keep (Bazel's, execution logs, the wheels, engine/)"
  fi
  [[ -n $engine_started ]] && "$workspace/tools/rbe/engine.sh" stop --name "$engine"
  for i in "${!bases[@]}"; do
    (cd "${base_dirs[$i]}" && ./tools/bazel --output_base="${bases[$i]}" shutdown >/dev/null 2>&1)
  done
  rm -rf "$scratch" "$clones"
  [[ -n ${url:-} ]] && rm -f "$cache/bazel/image.remote-$(printf '%s' " rbe=$url" | sha256sum | cut -c1-12).bazelrc"
}
trap cleanup EXIT
# Bash runs a trap only once the foreground command returns, so every Bazel
# run goes to the background and the script waits for it: `wait` returns
# at once on a signal, and the cleanup stops the build.
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

engine_cmd() { "$workspace/tools/rbe/engine.sh" "$@" --name "$engine"; }

# timed NAME SECONDS: remembers a timing for the summary.
timed() { timings+=("$(printf '%-44s %5d s' "$1" "$2")"); }

# bz NAME DIR BASE ARGS...: runs tools/bazel in clone DIR with output base
# BASE (no disk cache, no bazel-* links), stderr to $scratch/NAME.log and the
# execution log to $scratch/NAME.json; returns Bazel's exit status.
# (Run in the background, call `register DIR BASE` first: a subshell's
# registration is lost.)
register() {
  if [[ " ${bases[*]} " != *" $2 "* ]]; then
    base_dirs+=("$1")
    bases+=("$2")
  fi
}
bz() {
  local name=$1 dir=$2 base=$3
  shift 3
  register "$dir" "$base"
  (cd "$dir" && STABLEOPS_REMOTE_EXECUTOR=${url:-} ./tools/bazel --output_base="$base" "$@" \
    --disk_cache= --symlink_prefix=/ --color=no --curses=no \
    --execution_log_json_file="$scratch/$name.json") 2>"$scratch/$name.log"
}

# done_with DIR BASE: shuts BASE's Bazel server down (memory: the machine
# runs other builds too).
done_with() { (cd "$1" && ./tools/bazel --output_base="$2" shutdown >/dev/null 2>&1) || true; }

# run_step NAME DIR BASE ARGS...: bz, timed, and fails the test (with the
# log's tail) if Bazel fails.
run_step() {
  local name=$1 start=$SECONDS
  say "$name: bazel ${*:4}"
  register "$2" "$3"
  bz "$@" &
  wait $! || { tail -n 40 "$scratch/$name.log" >&2; fail "$name failed (bazel ${*:4})"; }
  timed "$name" $((SECONDS - start))
  say "$name took $((SECONDS - start)) s: $(grep -E '^INFO: [0-9]+ processes' "$scratch/$name.log" | tail -n1)"
}

# wheel_of BASE: the CUDA wheel in BASE's bazel-bin.
wheel_of() {
  local f
  for f in "$1"/execroot/_main/bazel-out/*/bin/python/stableops-*-cp310-abi3-*.whl; do
    [[ -f $f && $f != *+rocm* && $f != *+cpu* ]] && { echo "$f"; return 0; }
  done
  say "no CUDA wheel in the bazel-bin of $1"
  return 1
}
# sha_of BASE: the sha256 of BASE's CUDA wheel.
sha_of() {
  local w
  w=$(wheel_of "$1") || fail "expected a wheel from the build in $1, found none"
  cp "$w" "$scratch/$(basename "$1").whl"  # kept with the logs on a failure
  sha256sum "$w" | cut -d' ' -f1
}

# where NAME...: sums exec_log.py's "where" over execution logs; sets
# spawns remote hits local local_allowed; fails if a spawn ran locally that
# may not.
where() {
  spawns=0 remote=0 hits=0 local=0 local_allowed=0
  local name s r h l a counts
  for name in "$@"; do
    counts=$(python3 "$workspace/tools/exec_log.py" where "$scratch/$name.json" --local-ok="$local_ok" 2>"$scratch/$name.where") ||
      { cat "$scratch/$name.where" >&2; fail "$name: a spawn ran locally that must run remotely (listed above)"; }
    read -r s r h l a <<<"$counts"
    spawns=$((spawns + s)) remote=$((remote + r)) hits=$((hits + h)) local=$((local + l)) local_allowed=$((local_allowed + a))
  done
}

head=$(git rev-parse HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  say "note: uncommitted changes are not tested; the clones are of HEAD ($head)"
clone() {
  git clone -q --no-hardlinks "$workspace" "$1"
  git -C "$1" checkout -q --detach "$head"
}

total_start=$SECONDS

# --- E: the engine -----------------------------------------------------------
start=$SECONDS
engine_started=1
url=$(engine_cmd start --workers "$workers")
timed "E  engine start ($workers workers)" $((SECONDS - start))
say "engine $engine at $url"

# --- A: everything remotely, from scratch ----------------------------------
clone "$clones/a"
A="$scratch/A"
run_step A-build "$clones/a" "$A" build //python:wheel --config=rbe --noremote_accept_cached "$@"
sum_remote=$(sha_of "$A")
run_step A-test "$clones/a" "$A" test //tests:all --config=rbe --noremote_accept_cached "$@"
run_step A-test-rocm "$clones/a" "$A" test //tests:all --config=rocm --config=rbe --noremote_accept_cached "$@"
where A-build A-test A-test-rocm
say "A: $spawns spawns: $remote executed remotely, $hits remote cache hits, $local local ($local_allowed of them tests that stay local by design)"
grep -h -E '^INFO: Build completed|Executed [0-9]+ out of' "$scratch"/A-test*.log | sed 's/^/  /' >&2
((hits == 0)) || fail "A ran with --noremote_accept_cached but $hits spawns were remote cache hits"
((remote > 0)) || fail "A executed nothing remotely"
a_summary="$spawns spawns, $remote remote, $local local (allowed: $local_allowed)"
done_with "$clones/a" "$A"

jobs=$(engine_cmd jobs)
say "completed jobs per worker: $(echo "$jobs" | tr '\n' ' ')"
for i in $(seq "$workers"); do
  n=$(awk -v w="stableops-worker-$i" '$1 == w {print $2}' <<<"$jobs")
  ((${n:-0} > 0)) || fail "worker $i completed no job (BuildGrid's jobs per worker: $(echo "$jobs" | tr '\n' ' '))"
done

# --- L: the same wheel, built locally --------------------------------------
run_step L-local-build "$clones/a" "$scratch/L" build //python:wheel --remote_cache= "$@"
sum_local=$(sha_of "$scratch/L")
say "wheel built remotely: $sum_remote; built locally: $sum_local"
[[ $sum_remote == "$sum_local" ]] || fail "the remotely built wheel differs from the local one (both kept with the logs as A.whl and L.whl)"
done_with "$clones/a" "$scratch/L"

# --- B: another clone, served from the remote cache ------------------------
clone "$clones/clone-b"
run_step B-build "$clones/clone-b" "$scratch/B" build //python:wheel --config=rbe "$@"
run_step B-test "$clones/clone-b" "$scratch/B" test //tests:all --config=rbe "$@"
where B-build B-test
cacheable=$((spawns - local_allowed))
((cacheable > 0)) || fail "B ran no spawn that may use the remote cache"
percent=$(python3 -c "print(f'{100 * $hits / $cacheable:.1f}')")
say "B: $hits of $cacheable spawns that may use the remote cache were hits: ${percent}% ($remote executed remotely, $local_allowed local by design)"
python3 -c "import sys; sys.exit(0 if $hits * 100 >= $min_percent * $cacheable else 1)" ||
  fail "only ${percent}% remote cache hits in the second clone (need ${min_percent}%); compare A-*.json and B-*.json"
b_summary="${percent}% ($hits/$cacheable)"
done_with "$clones/clone-b" "$scratch/B"

# --- F1, F2: faults ----------------------------------------------------------
f1_summary=skipped f2_summary=skipped
if [[ $faults == 1 ]]; then
  # wait_for WHAT SECONDS PID COMMAND...: polls COMMAND until it succeeds,
  # while the build PID runs.
  wait_for() {
    local what=$1 limit=$2 pid=$3 deadline=$((SECONDS + $2))
    shift 3
    until "$@" >/dev/null 2>&1; do
      kill -0 "$pid" 2>/dev/null || return 1
      ((SECONDS < deadline)) || fail "no $what within ${limit} s"
      sleep 1
    done
  }
  worker_busy() { engine_cmd running | grep -q "^stableops-worker-$1 "; }
  any_busy() { [[ -n $(engine_cmd running) ]]; }

  # F1: a worker dies.
  say "F1: kill worker 1 while it runs an action of a build"
  start=$SECONDS
  register "$clones/a" "$scratch/F1"
  bz F1-build "$clones/a" "$scratch/F1" build //python:wheel --config=rbe --noremote_accept_cached "$@" &
  bpid=$!
  if wait_for "action running on worker 1" 900 "$bpid" worker_busy 1; then
    engine_cmd kill-worker 1
    killed_at=$SECONDS
    set +e
    wait "$bpid"
    rc=$?
    set -e
    ((rc == 0)) || { tail -n 40 "$scratch/F1-build.log" >&2; fail "F1: the build failed (exit $rc) after worker 1 was killed"; }
    retried=$(engine_cmd query "select count(*) from jobs where n_tries > 1")
    sum=$(sha_of "$scratch/F1")
    [[ $sum == "$sum_remote" ]] || fail "F1: the wheel differs after a worker was killed ($sum, expected $sum_remote)"
    f1_summary="build finished $((SECONDS - killed_at)) s after the kill, same wheel; $retried job(s) retried by BuildGrid"
  else
    wait "$bpid" || true
    fail "F1: the build ended before worker 1 ran an action (see F1-build.log)"
  fi
  timed "F1 build with a worker killed" $((SECONDS - start))
  say "F1: $f1_summary"
  done_with "$clones/a" "$scratch/F1"
  engine_cmd start-worker 1

  # F2: the server restarts.
  say "F2: restart BuildGrid while a build runs"
  start=$SECONDS
  register "$clones/a" "$scratch/F2"
  bz F2-build "$clones/a" "$scratch/F2" build //python:wheel --config=rbe --noremote_accept_cached "$@" &
  bpid=$!
  if wait_for "action running" 900 "$bpid" any_busy; then
    sleep 5
    engine_cmd restart-server --down 5
    set +e
    wait "$bpid"
    rc=$?
    set -e
    if ((rc == 0)); then
      f2_outcome="the build retried and finished"
    else
      msg=$(grep -m1 -E 'ERROR:|UNAVAILABLE|Connection refused|failed' "$scratch/F2-build.log" || true)
      f2_outcome="the build failed (exit $rc): ${msg:-no message}"
    fi
  else
    wait "$bpid" || true
    fail "F2: the build ended before an action ran (see F2-build.log)"
  fi
  timed "F2 build across a server restart" $((SECONDS - start))
  say "F2: $f2_outcome"
  run_step F2-rebuild "$clones/a" "$scratch/F2" build //python:wheel --config=rbe "$@"
  sum=$(sha_of "$scratch/F2")
  [[ $sum == "$sum_remote" ]] || fail "F2: the wheel of the build after the restart differs ($sum, expected $sum_remote)"
  cas=$(engine_cmd verify-cas) || fail "F2: the CAS is corrupted after the server restart: $cas"
  f2_summary="$f2_outcome; the next build succeeded with the same wheel; $cas"
  say "F2: $f2_summary"
fi

# --- summary -------------------------------------------------------------------
say "OK in $((SECONDS - total_start)) s"
{
  echo "remote execution test: OK ($workers workers, runner buildbox-run-${STABLEOPS_RBE_RUNNER:-bubblewrap})"
  echo "  A (from scratch, --noremote_accept_cached): $a_summary; all tests passed"
  echo "  wheel: remote = local = $sum_remote"
  echo "  B (second clone): remote cache hits $b_summary"
  echo "  F1 (worker killed): $f1_summary"
  echo "  F2 (server restarted): $f2_summary"
  echo "  timings:"
  printf '    %s\n' "${timings[@]}"
  printf '    %-44s %5d s\n' "total" $((SECONDS - total_start))
}
