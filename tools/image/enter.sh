#!/usr/bin/env bash
# tools/image/enter.sh: runs a command inside the build image.
#
#   tools/image/enter.sh ROOTFS STATE_DIR [--bind SRC[:DST]]... [--chdir DIR] -- CMD [ARG]...
#
# (Paths must not contain ':'.)
# The command runs chrooted into ROOTFS, in a mount namespace shared by every
# call with the same STATE_DIR, with /proc, /dev and /sys mounted and each SRC
# bind-mounted at DST inside the image (default: the same path), re-mounted
# when the host directory was replaced since. The namespace is held by a small
# process (this script in --hold mode, pid in STATE_DIR/holder.pid) that exits
# once nothing else has run in it for a minute.
#
# One namespace per image, not one per call, because a Bazel server started by
# one call must see the same mounts as the next call's client: the client
# compares the server's working directory with the output base and restarts a
# server whose view differs. tools/bazel, tools/image/provision.sh and
# benchmarks/build_speed.sh all enter the image through this script.
#
# Environment passed in: HOME=/root, LANG, PATH, TERM, CI, the proxy
# variables and every PIP_* and STABLEOPS_* variable; nothing else.
set -euo pipefail

die() {
  printf 'tools/bazel: error: %s\n' "$*" >&2
  exit 1
}

# --hold ROOTFS STATE_DIR: the namespace holder (started by _holder below,
# already inside its own mount namespace).
if [[ ${1:-} == --hold ]]; then
  root=$2 state=$3
  # The image's root a mount point of its own: bubblewrap (the remote
  # execution workers' sandbox, tools/rbe) makes "/" a slave mount and
  # pivot_roots, which fails with EINVAL on a root that is a plain directory.
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  echo $$ >"$state/holder.pid"
  me=$(readlink /proc/$$/ns/mnt)
  idle=0
  while sleep 20; do
    busy=0
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [[ $p == "$$" ]] && continue
      [[ $(readlink "/proc/$p/ns/mnt" 2>/dev/null) == "$me" ]] || continue
      read -r _ _ _ ppid _ <"/proc/$p/stat" 2>/dev/null || continue
      [[ $ppid == "$$" ]] && continue # our own sleep
      busy=1
      break
    done
    if ((busy)); then idle=0; else idle=$((idle + 1)); fi
    ((idle < 3)) || exit 0
  done
fi

root=${1:?usage: enter.sh ROOTFS STATE_DIR [--bind SRC[:DST]]... [--chdir DIR] -- CMD [ARG]...}
state=${2:?usage: enter.sh ROOTFS STATE_DIR [--bind SRC[:DST]]... [--chdir DIR] -- CMD [ARG]...}
shift 2
binds=()
chdir=/
while (($#)); do
  case $1 in
    --bind) binds+=("$2"); shift 2 ;;
    --chdir) chdir=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
(($#)) || die "enter.sh: no command given"

# Prints the pid of the process holding the namespace, starting one when none
# is alive (under a lock, so concurrent calls share one).
holder() {
  mkdir -p "$state"
  (
    flock 8
    pid=$(cat "$state/holder.pid" 2>/dev/null || true)
    if [[ -n $pid && -r /proc/$pid/ns/mnt ]] && grep -qa -- --hold "/proc/$pid/cmdline" 2>/dev/null; then
      echo "$pid"
      exit 0
    fi
    rm -f "$state/holder.pid"
    unshare --mount --propagation private -- setsid "${BASH_SOURCE[0]}" --hold "$root" "$state" \
      </dev/null >/dev/null 2>&1 8>&- &
    for _ in $(seq 100); do
      [[ -s $state/holder.pid ]] && break
      sleep 0.05
    done
    cat "$state/holder.pid" 2>/dev/null || die "could not start the build image's mount namespace (see $state)"
  ) 8>"$state/lock"
}

env_args=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for v in TERM CI http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY $(compgen -e | grep -E '^(PIP_|STABLEOPS_)' || true); do
  [[ -n ${!v:-} ]] && env_args+=("$v=${!v}")
done

pid=$(holder)
# Inside the namespace: (re)mount the binds, chroot, cd, run. The inner
# script is a fixed string; everything variable comes in as arguments.
# shellcheck disable=SC2016
exec nsenter --mount="/proc/$pid/ns/mnt" -- /bin/bash -euc '
  root=$1 nbinds=$2
  shift 2
  while ((nbinds > 0)); do
    src=${1%%:*} dst=${1#*:}
    shift
    nbinds=$((nbinds - 1))
    if mountpoint -q "$root$dst"; then
      [[ $(stat -c %d:%i "$src") == $(stat -c %d:%i "$root$dst") ]] && continue
      umount -l "$root$dst"
    fi
    mkdir -p "$root$dst"
    mount --bind "$src" "$root$dst"
  done
  exec chroot "$root" /usr/bin/env -i "$@"
' enter "$root" "${#binds[@]}" "${binds[@]/%/}" \
  "${env_args[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$chdir" "$@"
