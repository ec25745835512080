# Shell functions shared by tools/bazel and tools/image/provision.sh.
# shellcheck shell=bash

die() {
  printf 'tools/bazel: error: %s\n' "$*" >&2
  exit 1
}

# The image's identity: the recipe and the script that realises it.
recipe_hash() {
  local dir
  dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
  cat "$dir/recipe.sh" "$dir/provision.sh" | sha256sum | cut -c1-16
}

# require_free_space DIR GIB: dies with a one-line message when DIR's file
# system has less than GIB GiB free.
require_free_space() {
  local dir=$1 need=$2 have
  mkdir -p "$dir"
  have=$(df -Pk "$dir" | awk 'NR==2 {print int($4 / 1048576)}')
  if ((have < need)); then
    die "disk full: provisioning needs ${need} GiB free under $dir, found ${have} GiB; free space or set STABLEOPS_CACHE_DIR to a larger disk"
  fi
}

# Prints the Debian archive URI this machine's apt uses (deb822 .sources or
# one-line .list entries), skipping security and third-party archives.
debian_mirror() {
  if [[ -n ${STABLEOPS_DEBIAN_MIRROR:-} ]]; then
    echo "$STABLEOPS_DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(
    {
      cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
        /^[[:space:]]*$/ { if (u && s !~ /security/ && k ~ /debian-archive/) print u; u = s = k = ""; next }
        /^URIs:/ { u = $2 } /^Suites:/ { s = $0 } /^Signed-By:/ { k = $0 }
        END { if (u && s !~ /security/ && k ~ /debian-archive/) print u }'
      cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }'
    } | grep -E '/debian/?$' | head -n1
  )
  [[ -n $uri ]] || die "found no Debian archive in /etc/apt/sources.list{,.d}; set STABLEOPS_DEBIAN_MIRROR to a Debian mirror URL"
  echo "${uri%/}"
}

# Dies with a one-line message when SUITE's Release file cannot be fetched.
check_mirror() {
  local mirror=$1 suite=$2 url="$1/dists/$2/Release"
  if command -v curl >/dev/null; then
    curl -fsS --max-time 30 -o /dev/null "$url" 2>/dev/null && return 0
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read(1)' "$url" 2>/dev/null && return 0
  fi
  die "no network to the Debian mirror: could not fetch $url (the build image needs it the first time); check the network or set STABLEOPS_DEBIAN_MIRROR"
}

# Name resolution inside the image follows the host's.
copy_host_net_config() {
  local root=$1 f
  for f in /etc/resolv.conf /etc/hosts; do
    [[ -r $f ]] && cat "$f" >"$root$f.new" && mv -f "$root$f.new" "$root$f"
  done
  return 0
}

# pip inside the image uses this machine's own pip configuration (index,
# certificates, constraints); no index host is written into the repository.
copy_host_pip_config() {
  local root=$1 f
  for f in /etc/pip.conf /etc/xdg/pip/pip.conf /etc/xdg/pip/constraints.txt "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
    if [[ -r $f ]]; then
      mkdir -p "$(dirname "$root$f")"
      cp -f "$f" "$root$f"
    fi
  done
}

# in_image ROOTFS [--bind SRC DST]... [--chdir DIR] [--] CMD [ARG]...
# Runs CMD chrooted into ROOTFS inside a private mount namespace with /proc,
# /dev and /sys mounted and each SRC bind-mounted at DST (paths inside the
# image). The mounts disappear with the last process of the namespace.
in_image() {
  local root=$1
  shift
  local -a binds=()
  local chdir=/
  while (($#)); do
    case $1 in
      --bind) binds+=("$2" "$3"); shift 3 ;;
      --chdir) chdir=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  local -a pass_env=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  local v
  for v in TERM CI http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY $(compgen -e | grep -E '^(PIP_|STABLEOPS_)' || true); do
    [[ -n ${!v:-} ]] && pass_env+=("$v=${!v}")
  done
  unshare --mount --propagation private -- /bin/bash -euc '
    root=$1 chdir=$2 nbinds=$3
    shift 3
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    while ((nbinds > 0)); do
      mkdir -p "$root$2"
      mount --bind "$1" "$root$2"
      shift 2
      nbinds=$((nbinds - 1))
    done
    shift  # the "--" that ends the bind list
    exec chroot "$root" /usr/bin/env -i "$@"
  ' in_image "$root" "$chdir" $((${#binds[@]} / 2)) "${binds[@]}" -- \
    "${pass_env[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$chdir" "$@"
}

# image_exec ROOTFS STATE_DIR [--bind DIR]... [--chdir DIR] [--] CMD [ARG]...
# Like in_image, but every call shares ONE long-lived mount namespace per
# image, held by a small process (pid in STATE_DIR/holder.pid) that exits once
# nothing else has run in it for a minute. A Bazel server started by one call
# must see the same mounts as the next call's client: the client compares the
# server's working directory with the output base and restarts a server whose
# view differs. Each DIR is bind-mounted at the same path inside the image
# (re-mounted if the host directory was replaced since).
image_exec() {
  local root=$1 state=$2
  shift 2
  local -a dirs=()
  local chdir=/
  while (($#)); do
    case $1 in
      --bind) dirs+=("$2"); shift 2 ;;
      --chdir) chdir=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  local pid
  pid=$(_image_holder "$root" "$state")
  local -a pass_env=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  local v
  for v in TERM CI http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY $(compgen -e | grep -E '^(PIP_|STABLEOPS_)' || true); do
    [[ -n ${!v:-} ]] && pass_env+=("$v=${!v}")
  done
  exec nsenter --mount="/proc/$pid/ns/mnt" -- /bin/bash -euc '
    root=$1 ndirs=$2
    shift 2
    while ((ndirs > 0)); do
      d=$1
      shift
      ndirs=$((ndirs - 1))
      if mountpoint -q "$root$d"; then
        [[ $(stat -c %d:%i "$d") == $(stat -c %d:%i "$root$d") ]] && continue
        umount -l "$root$d"
      fi
      mkdir -p "$root$d"
      mount --bind "$d" "$root$d"
    done
    exec chroot "$root" /usr/bin/env -i "$@"
  ' image_exec "$root" "${#dirs[@]}" "${dirs[@]}" \
    "${pass_env[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$chdir" "$@"
}

# Prints the pid of the process holding the image's shared mount namespace,
# starting one (with /proc, /dev and /sys mounted) when none is alive.
_image_holder() {
  local root=$1 state=$2 pid
  mkdir -p "$state"
  (
    flock 8
    pid=$(cat "$state/holder.pid" 2>/dev/null || true)
    local arg0=
    [[ -n $pid ]] && read -r -d '' arg0 <"/proc/$pid/cmdline" 2>/dev/null
    if [[ $arg0 == stableops-ns ]] && [[ -r /proc/$pid/ns/mnt ]]; then
      echo "$pid"
      exit 0
    fi
    rm -f "$state/holder.pid"
    unshare --mount --propagation private -- setsid /bin/bash -c '
      exec -a stableops-ns /bin/bash -c "
        root=\$1 state=\$2
        mount -t proc proc \"\$root/proc\"
        mount --rbind /dev \"\$root/dev\"
        mount --rbind /sys \"\$root/sys\"
        echo \$\$ >\"\$state/holder.pid\"
        me=\$(readlink /proc/\$\$/ns/mnt)
        idle=0
        while sleep 20; do
          busy=0
          for p in /proc/[0-9]*; do
            p=\${p#/proc/}
            [[ \$p == \$\$ ]] && continue
            [[ \$(readlink /proc/\$p/ns/mnt 2>/dev/null) == \"\$me\" ]] || continue
            read -r _ _ _ ppid _ </proc/\$p/stat 2>/dev/null || continue
            [[ \$ppid == \$\$ ]] && continue
            busy=1
            break
          done
          if ((busy)); then idle=0; else idle=\$((idle + 1)); fi
          ((idle < 3)) || exit 0
        done
      " stableops-ns "$0" "$1"
    ' "$root" "$state" </dev/null >/dev/null 2>&1 8>&- &
    for _ in $(seq 100); do
      [[ -s $state/holder.pid ]] && break
      sleep 0.05
    done
    cat "$state/holder.pid" 2>/dev/null || die "could not start the build image's mount namespace (see $state)"
  ) 8>"$state/lock"
}
