# Shell functions shared by tools/bazel and tools/image/provision.sh. Running
# a command inside the image is tools/image/enter.sh's job.
# shellcheck shell=bash

die() {
  printf 'tools/bazel: error: %s\n' "$*" >&2
  exit 1
}

# The image's identity: the recipe, the script that realises it and the lock
# of its BuildGrid environment. Provisioning writes it into the image too
# (/opt/stableops/image-id): remote-execution workers advertise it and the
# execution platform asks for it (docs/REMOTE_EXECUTION.md).
recipe_hash() {
  local dir
  dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
  cat "$dir/recipe.sh" "$dir/provision.sh" "$dir/buildgrid.lock" | sha256sum | cut -c1-16
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
  local url="$1/dists/$2/Release"
  if command -v curl >/dev/null; then
    curl -fsS --max-time 30 -o /dev/null "$url" 2>/dev/null && return 0
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=30).read(1)' "$url" 2>/dev/null && return 0
  fi
  die "no network to the Debian mirror: could not fetch $url (the build image needs it the first time); check the network or set STABLEOPS_DEBIAN_MIRROR"
}

# Name resolution inside the image follows the host's. Every entry into the
# image (tools/bazel, tools/rbe/engine.sh, ...) refreshes the files, often
# several at once: each writes its own temporary file and renames it into
# place, so no entry can rename away another's (a shared "$f.new" once made
# a concurrent `tools/bazel` fail with "mv: cannot stat .../etc/hosts.new").
copy_host_net_config() {
  local root=$1 f tmp
  for f in /etc/resolv.conf /etc/hosts; do
    [[ -r $f ]] || continue
    tmp="$root$f.new.$BASHPID"
    cat "$f" >"$tmp" && mv -f "$tmp" "$root$f"
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
