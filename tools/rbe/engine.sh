#!/usr/bin/env bash
# tools/rbe/engine.sh: a throwaway remote-execution engine for Bazel, BuildGrid
# + buildbox, on 127.0.0.1 only, inside the build image (the same image
# tools/bazel runs Bazel in: actions name their compilers and interpreters by
# absolute paths of the image, so workers must run in it too).
#
#   tools/rbe/engine.sh start [--workers N] [--name NAME]
#       Starts, each on a free loopback port and as a process of its own:
#         - PostgreSQL (initdb into the run directory, pg_ctl start, as the
#           image's postgres user: PostgreSQL refuses to run as root), the
#           database of BuildGrid's scheduler (it refuses SQLite);
#         - BuildGrid (`bgd migrate apply`, then `bgd server start`): Execution,
#           Bots, CAS (on disk), ByteStream and an in-memory action cache;
#         - N workers (default 2), each a buildbox-casd (its own local CAS,
#           proxying the server's) and a buildbox-worker that runs actions
#           with buildbox-run-bubblewrap (see "Runner" below).
#       Waits until every worker has a bot session, then prints the executor
#       URL (grpc://127.0.0.1:PORT) on stdout, for STABLEOPS_REMOTE_EXECUTOR.
#       On any failure (or Ctrl-C) it stops what it had started.
#   tools/rbe/engine.sh stop [--name NAME] [--keep]
#       Stops every process `start` started, by PID (TERM, then KILL after
#       20 s), and removes the run directory (--keep: leaves it, logs and CAS
#       included).
#   tools/rbe/engine.sh status [--name NAME]
#       The executor URL, each process and whether it runs, jobs per worker.
#   tools/rbe/engine.sh jobs [--name NAME]
#       "WORKER COMPLETED_JOBS" lines, from BuildGrid's database.
#   tools/rbe/engine.sh running [--name NAME]
#       "WORKER EXECUTING_JOBS" lines: what each worker runs now.
#   tools/rbe/engine.sh query SQL [--name NAME]
#       One SQL statement against BuildGrid's database (psql, unaligned).
#   tools/rbe/engine.sh verify-cas [--name NAME]
#       Checks that every blob of the server's CAS and of each worker's casd
#       store hashes to its name; exits 1 naming any that does not.
#   tools/rbe/engine.sh start-worker I [--name NAME]
#       Starts worker I again (after kill-worker).
#   tools/rbe/engine.sh kill-worker I [--name NAME]
#       Kills worker I (its buildbox-worker, buildbox-casd and running
#       action) with SIGKILL: a fault for tools/remote_exec_test.sh.
#   tools/rbe/engine.sh restart-server [--name NAME] [--down SECONDS]
#       Stops BuildGrid (SIGTERM), waits SECONDS (default 3) and starts it
#       again on the same port, database and CAS.
#
# tools/rbe/run.sh wraps start/stop around one command.
#
# Runner: buildbox-run-bubblewrap, the sandboxing one. Each action runs in a
# bubblewrap sandbox: its input root (staged by the worker's casd, hard links
# into casd's store) is `/`, with the image's /usr, /etc and /opt read-only
# (the merged-/usr links too), a fresh /tmp, new mount, PID, IPC, UTS and
# network namespaces (no network) and no capabilities. Two adaptations make it
# work inside the image, both here:
#   - tools/image/enter.sh makes the image's root a mount point of its own
#     (bwrap makes / a slave mount and pivot_roots: EINVAL on a plain
#     directory);
#   - the runner always asks bwrap for a user namespace, which the kernel
#     refuses to a chrooted process (EPERM, whatever the privileges): the
#     workers find tools/rbe/bwrap.sh first on PATH as `bwrap`, which drops
#     --unshare-user/--uid/--gid (the workers are root in the initial user
#     namespace and need none) and binds the image's directories in.
# buildbox-run-hosttools needs neither, but does not sandbox (the action runs
# in its staged directory with the image's whole file system writable and the
# network reachable): STABLEOPS_RBE_RUNNER=hosttools, for comparison only.
#
# Run directory: /tmp/stableops-rbe/NAME inside the image (the image's /tmp,
# where the postgres user can reach it), logs under its logs/. A pointer to
# it lives in <cache>/rbe/NAME.
#
# Environment:
#   STABLEOPS_CACHE_DIR   as for tools/bazel (which image; provisioned on
#                         first use through tools/bazel)
#   STABLEOPS_RBE_RUNNER  bubblewrap (default) or hosttools
#   STABLEOPS_RBE_IMAGE   an image directory (holding rootfs/) to run in instead
#                         of this checkout's, e.g. one unpacked from the
#                         exported OCI layout (tools/rbe/export_image.sh)
#   STABLEOPS_RBE_TIMEOUT seconds to wait for each service to come up
#                         (default 180: the machine may be busy)
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
# shellcheck source=tools/image/lib.sh
source "$workspace/tools/image/lib.sh"

die() {
  printf 'tools/rbe/engine.sh: error: %s\n' "$*" >&2
  exit 1
}
say() { printf 'tools/rbe/engine.sh: %s\n' "$*" >&2; }

usage="usage: tools/rbe/engine.sh start [--workers N] [--name NAME] | stop [--name NAME] [--keep] | status | jobs | running | query SQL | verify-cas | kill-worker I | start-worker I | restart-server [--down S]"
cmd=${1:-}
[[ -n $cmd ]] || die "$usage"
shift
name=default workers=2 keep='' down=3 index='' sql=''
while (($#)); do
  case $1 in
    --workers) workers=${2:-}; shift 2 ;;
    --workers=*) workers=${1#*=}; shift ;;
    --name) name=${2:-}; shift 2 ;;
    --name=*) name=${1#*=}; shift ;;
    --keep) keep=1; shift ;;
    --down) down=${2:-}; shift 2 ;;
    --down=*) down=${1#*=}; shift ;;
    [0-9]*) index=$1; shift ;;
    *)
      [[ $cmd == query && -z ${sql:-} ]] || die "unknown argument '$1'; $usage"
      sql=$1
      shift
      ;;
  esac
done
[[ $workers =~ ^[1-9][0-9]?$ ]] || die "--workers must be a number from 1 to 99, found '$workers'"
[[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || die "--name must be letters, digits, '.', '_' or '-', found '$name'"
[[ $down =~ ^[0-9]+$ ]] || die "--down must be a number of seconds, found '$down'"
[[ $EUID -eq 0 ]] || die "the engine runs inside the build image (chroot and mounts), which needs root; run as root"

runner=${STABLEOPS_RBE_RUNNER:-bubblewrap}
case $runner in
  bubblewrap | hosttools) ;;
  *) die "STABLEOPS_RBE_RUNNER must be bubblewrap or hosttools, found '$runner'" ;;
esac
wait_s=${STABLEOPS_RBE_TIMEOUT:-180}
[[ $wait_s =~ ^[0-9]+$ ]] || die "STABLEOPS_RBE_TIMEOUT must be a number of seconds, found '$wait_s'"

cache=${STABLEOPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stableops}
pointer="$cache/rbe/$name"

# The image: the one tools/bazel uses for this checkout (provisioned by it
# when missing). Set for `start` here; the other commands read it back from
# the run directory's pointer.
image_for_start() {
  if [[ -n ${STABLEOPS_RBE_IMAGE:-} ]]; then
    image=$(cd "$STABLEOPS_RBE_IMAGE" 2>/dev/null && pwd -P) || die "STABLEOPS_RBE_IMAGE must be an image directory holding rootfs/, found '$STABLEOPS_RBE_IMAGE'"
    [[ -d $image/rootfs/usr ]] || die "STABLEOPS_RBE_IMAGE must be an image directory holding rootfs/, found no $image/rootfs/usr"
    return
  fi
  image="$cache/images/$(recipe_hash)"
  if [[ ! -f $image/.provisioned ]]; then
    say "the build image of this checkout is not provisioned yet: provisioning it through tools/bazel"
    STABLEOPS_IMAGE_ONLY=1 "$workspace/tools/bazel" version >/dev/null
  fi
  [[ -f $image/.provisioned ]] || die "expected the build image at $image after provisioning, found none; run STABLEOPS_IMAGE_ONLY=1 tools/bazel version and read its output"
}

load_pointer() {
  [[ -s $pointer ]] || die "no engine named '$name' was started (no $pointer); start one with: tools/rbe/engine.sh start --name $name"
  run=$(<"$pointer")
  image=${run%/rootfs/tmp/stableops-rbe/*}
  [[ -d $run ]] || die "the engine '$name' has no run directory any more ($run); remove $pointer"
  set_paths
}

set_paths() {
  rootfs="$image/rootfs"
  ns="$cache/ns/$(basename "$image")"
  # The run directory as the image sees it.
  irun=${run#"$rootfs"}
}

# in_image CMD...: runs CMD inside the image (shared namespace of tools/bazel).
in_image() {
  copy_host_net_config "$rootfs"
  "$workspace/tools/image/enter.sh" "$rootfs" "$ns" -- "$@"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }

# record ROLE PID: remembers a started process (one line each, in start order).
record() { printf '%s %s\n' "$1" "$2" >>"$run/pids"; }

pid_of() { awk -v r="$1" '$1 == r {p = $2} END {print p}' "$run/pids" 2>/dev/null; }

# stop_pid ROLE PID: TERM to the process group PID leads (each service is
# started with setsid), KILL after 20 s. Only PIDs this engine recorded, and
# only while /proc says they are still in this engine's run directory or the
# image (a recycled PID belongs to someone else).
stop_pid() {
  local role=$1 pid=$2 i root
  alive "$pid" || return 0
  # (An exiting process has no readable root any more: signalling it is harmless.)
  root=$(readlink "/proc/$pid/root" 2>/dev/null || true)
  if [[ -n $root && $root != "$rootfs" ]]; then
    say "not stopping $role: pid $pid is no longer one of this engine's processes"
    return 0
  fi
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 40); do
    alive "$pid" || return 0
    sleep 0.5
  done
  say "$role (pid $pid) ignored SIGTERM for 20 s: SIGKILL"
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
}

stop_all() {
  local role pid
  [[ -f $run/pids ]] || return 0
  # Workers first, then their casds, BuildGrid, PostgreSQL: reverse start order.
  while read -r role pid; do
    if [[ $role == postgres ]]; then
      in_image runuser -u postgres -- timeout 60 "$pgbin/pg_ctl" -D "$irun/pg/data" -m fast -w -t 30 stop >>"$run/logs/postgres.log" 2>&1 || true
    fi
    stop_pid "$role" "$pid"
  done < <(tac "$run/pids")
  : >"$run/pids"
}

# psql_q SQL: one query against BuildGrid's database, unaligned output.
psql_q() {
  in_image runuser -u postgres -- timeout 30 "$pgbin/psql" -h 127.0.0.1 -p "$pg_port" -d bgd -AtX -c "$1"
}

tail_log() { tail -n "${2:-15}" "$run/logs/$1" 2>/dev/null | sed 's/^/    /' >&2 || true; }

start_server() {
  setsid "$workspace/tools/image/enter.sh" "$rootfs" "$ns" -- \
    /opt/stableops/buildgrid/bin/bgd server start "$irun/buildgrid.yml" \
    >>"$run/logs/buildgrid.log" 2>&1 </dev/null &
  record buildgrid $!
  local deadline=$((SECONDS + wait_s))
  until in_image timeout 20 /opt/stableops/buildgrid/bin/bgd capabilities --remote="http://127.0.0.1:$bgd_port" >/dev/null 2>&1; do
    alive "$(pid_of buildgrid)" || { tail_log buildgrid.log; die "BuildGrid exited at start (log: $run/logs/buildgrid.log)"; }
    ((SECONDS < deadline)) || { tail_log buildgrid.log; die "BuildGrid did not answer GetCapabilities on 127.0.0.1:$bgd_port within ${wait_s} s (log: $run/logs/buildgrid.log)"; }
    sleep 1
  done
}

# start_worker I: worker I's buildbox-casd (its local CAS, proxying the
# server's) and buildbox-worker, each a process group of its own.
start_worker() {
  local i=$1 w="$run/worker-$1" iw="$irun/worker-$1" deadline
  # Staged by hard links from the worker's casd (copy-or-link): the default,
  # FUSE, lost appended writes of a second process in a test here.
  local runner_args=(--runner-arg=--staging-mode=copy-or-link)
  mkdir -p "$w/cache" "$run/bin"
  rm -f "$w/casd.sock"
  [[ $runner != bubblewrap ]] || install -m 755 "$workspace/tools/rbe/bwrap.sh" "$run/bin/bwrap"
  # Both keep retrying a lost server for about a minute (0.5 s, doubling),
  # so a server restart does not take the workers down with it; the worker
  # also retries a busy server (RESOURCE_EXHAUSTED) instead of exiting.
  setsid "$workspace/tools/image/enter.sh" "$rootfs" "$ns" -- \
    buildbox-casd --cas-remote="http://127.0.0.1:$bgd_port" --bind="unix:$iw/casd.sock" \
    --cas-retry-limit=7 --cas-retry-delay=500 --log-level=info "$iw/cache" \
    >>"$run/logs/casd-$i.log" 2>&1 </dev/null &
  record "casd-$i" $!
  deadline=$((SECONDS + wait_s))
  until [[ -S $w/casd.sock ]]; do
    alive "$(pid_of "casd-$i")" || { tail_log "casd-$i.log"; die "buildbox-casd of worker $i exited at start (log: $run/logs/casd-$i.log)"; }
    ((SECONDS < deadline)) || die "buildbox-casd of worker $i made no socket within ${wait_s} s (log: $run/logs/casd-$i.log)"
    sleep 0.2
  done
  setsid "$workspace/tools/image/enter.sh" "$rootfs" "$ns" -- \
    env PATH="$irun/bin:/usr/sbin:/usr/bin:/sbin:/bin" buildbox-worker \
    --bots-remote="http://127.0.0.1:$bgd_port" --cas-remote="unix:$iw/casd.sock" \
    --bots-retry-limit=7 --bots-retry-delay=500 \
    --bots-retry-on-code=UNAVAILABLE --bots-retry-on-code=RESOURCE_EXHAUSTED \
    --buildbox-run="/usr/bin/buildbox-run-$runner" "${runner_args[@]}" \
    --platform OSFamily=linux --platform ISA=x86-64 --platform "stableops-image=$image_id" \
    --max-wait-time=10 --log-level=info "stableops-worker-$i" \
    >>"$run/logs/worker-$i.log" 2>&1 </dev/null &
  record "worker-$i" $!
}

# The engine's settings, written by `start`, read by the other commands.
load_env() {
  executor='' bgd_port='' pg_port='' pgbin='' workers='' runner='' image_id=''
  # shellcheck disable=SC1091  # written by start
  source "$run/engine.env"
}

case $cmd in
  start)
    image_for_start
    if [[ -s $pointer ]]; then
      old=$(<"$pointer")
      while read -r _ p; do
        alive "$p" && die "an engine named '$name' is already running (pid $p; $old); stop it with: tools/rbe/engine.sh stop --name $name, or start another with --name"
      done < <(cat "$old/pids" 2>/dev/null || true)
      rm -rf "$old"
    fi
    run="$image/rootfs/tmp/stableops-rbe/$name"
    set_paths
    rm -rf "$run"
    mkdir -p "$run/logs" "$cache/rbe"
    chmod 755 "$run" "$(dirname "$run")"
    printf '%s\n' "$run" >"$pointer"
    : >"$run/pids"
    [[ -x $rootfs/opt/stableops/buildgrid/bin/bgd && -x $rootfs/usr/bin/buildbox-worker ]] ||
      die "the build image at $image has no BuildGrid or buildbox (a recipe older than tools/rbe?); run tools/bazel once to provision this checkout's image"
    pgbin=$(find "$rootfs/usr/lib/postgresql" -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n1)
    pgbin=${pgbin#"$rootfs"}
    [[ -n $pgbin ]] || die "expected PostgreSQL under /usr/lib/postgresql/*/bin in the image, found none"
    image_id=$(cat "$rootfs/opt/stableops/image-id" 2>/dev/null || true)
    [[ -n $image_id ]] || die "expected the image's identity in /opt/stableops/image-id, found none; re-provision the image (tools/bazel)"

    started=$SECONDS
    # shellcheck disable=SC2329  # run by the traps below
    on_fail() {
      local rc=$?
      trap - ERR INT TERM
      say "start failed: stopping what was started (logs kept in $run/logs)"
      stop_all
      exit "$rc"
    }
    trap on_fail ERR
    trap 'say "interrupted"; exit 130' INT TERM
    trap 'rc=$?; if ((rc != 0)); then trap - EXIT; stop_all; fi' EXIT

    pg_port=$(free_port)
    bgd_port=$(free_port)
    while [[ $bgd_port == "$pg_port" ]]; do bgd_port=$(free_port); done

    # --- PostgreSQL ----------------------------------------------------------
    say "PostgreSQL on 127.0.0.1:$pg_port (initdb, pg_ctl start as the image's postgres user)"
    in_image install -d -o postgres -g postgres -m 700 "$irun/pg" "$irun/pg/data"
    in_image runuser -u postgres -- timeout "$wait_s" "$pgbin/initdb" -D "$irun/pg/data" -U postgres \
      --auth=trust -E UTF8 --no-sync >>"$run/logs/postgres.log" 2>&1 ||
      { tail_log postgres.log; die "initdb failed (log: $run/logs/postgres.log)"; }
    touch "$run/logs/postgres-server.log" && chmod 666 "$run/logs/postgres-server.log"
    in_image runuser -u postgres -- timeout "$((wait_s + 10))" "$pgbin/pg_ctl" -D "$irun/pg/data" \
      -l "$irun/logs/postgres-server.log" -w -t "$wait_s" \
      -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $irun/pg -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >>"$run/logs/postgres.log" 2>&1 ||
      { tail_log postgres-server.log; die "PostgreSQL did not start on 127.0.0.1:$pg_port within ${wait_s} s (log: $run/logs/postgres-server.log)"; }
    record postgres "$(head -n1 "$run/pg/data/postmaster.pid")"
    in_image runuser -u postgres -- timeout 60 "$pgbin/createdb" -h 127.0.0.1 -p "$pg_port" bgd >>"$run/logs/postgres.log" 2>&1 ||
      { tail_log postgres.log; die "createdb bgd failed (log: $run/logs/postgres.log)"; }

    # --- BuildGrid -----------------------------------------------------------
    db="postgresql://postgres@127.0.0.1:$pg_port/bgd"
    say "BuildGrid on 127.0.0.1:$bgd_port (bgd migrate apply, bgd server start)"
    in_image timeout "$wait_s" /opt/stableops/buildgrid/bin/bgd migrate apply "$db" >>"$run/logs/buildgrid.log" 2>&1 ||
      { tail_log buildgrid.log; die "bgd migrate apply failed (log: $run/logs/buildgrid.log)"; }
    cat >"$run/buildgrid.yml" <<YAML
description: stableops throwaway remote-execution engine (tools/rbe/engine.sh)
server:
  - !channel
    address: "127.0.0.1:$bgd_port"
    insecure-mode: true
authorization:
  method: none
# Bazel and the workers stream large blobs (libtorch_cpu.so is 440 MB).
grpc-server-options:
  grpc.max_receive_message_length: 67108864
  grpc.max_send_message_length: 67108864
connections:
  - !sql-connection &sql
    connection-string: $db
    pool-size: 10
    pool-timeout: 30
    max-overflow: 20
storages:
  - !disk-storage &cas
    path: $irun/cas
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 100000
    allow-updates: true
    cache-failed-actions: false
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    storage: *cas
    action-cache: *ac
    property-set: !dynamic-property-set
      # OSFamily and ISA are always matched; the image identity too.
      match-property-keys: [stableops-image]
    # A worker silent for 30 s is gone: its job is queued again (up to 5
    # attempts), for the other worker.
    bot-session-keepalive-timeout: 30
    max-job-attempts: 5
    max-execution-timeout: 3600
instances:
  - name: ""
    services:
      - !action-cache
        cache: *ac
      - !execution
        scheduler: *scheduler
        operation-stream-keepalive-timeout: 30
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
# Every Execute call Bazel has open (--jobs, 32 under --config=rbe) holds a
# server thread for the whole action, and RPCs beyond the concurrency limit
# (by default the thread-pool size) are refused, not queued: Bazel's bursts of
# CAS uploads (thousands of sysroot files) went past 40 and then past 128, the
# workers' UpdateBotSession and casd's reads got "Concurrent RPC limit
# exceeded" (RESOURCE_EXHAUSTED) and a worker exited. Threads enough for
# Bazel's streams and the bots; everything else waits its turn.
thread-pool-size: 128
maximum-concurrent-rpcs: 4096
YAML
    start_server

    # --- workers -------------------------------------------------------------
    say "$workers worker(s): buildbox-casd + buildbox-worker + buildbox-run-$runner, advertising OSFamily=linux ISA=x86-64 stableops-image=$image_id"
    for i in $(seq "$workers"); do
      start_worker "$i"
    done

    cat >"$run/engine.env" <<ENV
executor=grpc://127.0.0.1:$bgd_port
bgd_port=$bgd_port
pg_port=$pg_port
pgbin=$pgbin
workers=$workers
runner=$runner
image_id=$image_id
ENV

    # Ready when BuildGrid holds a bot session for every worker.
    deadline=$((SECONDS + wait_s))
    while :; do
      n=$(psql_q "select count(distinct bot_id) from bots" 2>/dev/null || echo 0)
      ((n >= workers)) && break
      for i in $(seq "$workers"); do
        alive "$(pid_of "worker-$i")" || { tail_log "worker-$i.log"; die "buildbox-worker $i exited at start (log: $run/logs/worker-$i.log)"; }
      done
      ((SECONDS < deadline)) || die "only $n of $workers workers connected to BuildGrid within ${wait_s} s (logs: $run/logs/worker-*.log)"
      sleep 1
    done
    trap - ERR INT TERM EXIT
    say "ready in $((SECONDS - started)) s: $workers worker(s) connected; logs in $run/logs; stop with: tools/rbe/engine.sh stop --name $name"
    echo "grpc://127.0.0.1:$bgd_port"
    ;;

  stop)
    load_pointer
    load_env 2>/dev/null || true
    pgbin=${pgbin:-/usr/lib/postgresql/18/bin}
    stop_all
    if [[ -n $keep ]]; then
      say "stopped; run directory kept: $run"
    else
      rm -rf "$run" "$pointer"
      say "stopped and removed $run"
    fi
    ;;

  status)
    load_pointer
    load_env
    echo "executor: $executor ($workers worker(s), runner buildbox-run-$runner, run directory $run)"
    while read -r role pid; do
      if alive "$pid"; then echo "  $role: pid $pid, running"; else echo "  $role: pid $pid, not running"; fi
    done <"$run/pids"
    ;;

  jobs)
    load_pointer
    load_env
    # Completed jobs (stage 4) per worker (the bot id each worker gave itself).
    psql_q "select worker_name, count(*) from jobs where stage = 4 and worker_name is not null group by worker_name order by 1" | tr '|' ' '
    ;;

  query)
    load_pointer
    load_env
    [[ -n $sql ]] || die "query needs an SQL statement, e.g. tools/rbe/engine.sh query 'select count(*) from jobs'"
    psql_q "$sql"
    ;;

  verify-cas)
    load_pointer
    # Every blob of the server's disk CAS and of each worker's casd store
    # must hash to its name (objects/<first 2 hex>/<rest>).
    python3 - "$run" <<'PY'
import hashlib, pathlib, sys
run = pathlib.Path(sys.argv[1])
stores = [run / "cas" / "cas" / "objects"] + sorted(run.glob("worker-*/cache/cas/objects"))
total = bad = 0
for store in stores:
    for blob in store.glob("*/*"):
        if not blob.is_file():
            continue
        h = hashlib.sha256()
        with open(blob, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        total += 1
        if h.hexdigest() != blob.parent.name + blob.name:
            bad += 1
            print(f"corrupt: {blob}", file=sys.stderr)
print(f"{total} blobs in {len(stores)} stores verified, {bad} corrupt")
sys.exit(1 if bad or not total else 0)
PY
    ;;

  running)
    load_pointer
    load_env
    # Jobs executing now (stage 3) per worker.
    psql_q "select worker_name, count(*) from jobs where stage = 3 and worker_name is not null group by worker_name order by 1" | tr '|' ' '
    ;;

  start-worker)
    load_pointer
    load_env
    [[ -n $index && $index -ge 1 && $index -le $workers ]] || die "start-worker needs a worker number from 1 to $workers, found '${index:-nothing}'"
    alive "$(pid_of "worker-$index")" && die "worker $index is running (pid $(pid_of "worker-$index")); kill-worker $index first"
    start_worker "$index"
    say "worker $index started again"
    ;;

  kill-worker)
    load_pointer
    load_env
    [[ -n $index && $index -ge 1 && $index -le $workers ]] || die "kill-worker needs a worker number from 1 to $workers, found '${index:-nothing}'"
    for role in "worker-$index" "casd-$index"; do
      pid=$(pid_of "$role")
      alive "$pid" || continue
      [[ $(readlink "/proc/$pid/root" 2>/dev/null) == "$rootfs" ]] || continue
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
      say "killed $role (process group $pid) with SIGKILL"
    done
    ;;

  restart-server)
    load_pointer
    load_env
    pid=$(pid_of buildgrid)
    say "stopping BuildGrid (pid $pid), restarting it in $down s on 127.0.0.1:$bgd_port"
    stop_pid buildgrid "$pid"
    sleep "$down"
    start_server
    say "BuildGrid is back (pid $(pid_of buildgrid))"
    ;;

  *) die "$usage" ;;
esac
