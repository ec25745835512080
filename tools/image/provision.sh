#!/usr/bin/env bash
# Provisions the build image described by tools/image/recipe.sh into DEST.
#
#   tools/image/provision.sh DEST
#
# Called by tools/bazel (under a lock) when no image for the current recipe
# exists; not meant to be run by hand. Builds into DEST.tmp and renames it to
# DEST only when every step succeeded, so a half-made image is never used.
#
# Nothing here names a registry host: the Debian mirror is read from this
# machine's apt configuration (override: STABLEOPS_DEBIAN_MIRROR), and pip
# inside the image uses a copy of this machine's pip configuration.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=tools/image/recipe.sh
source "$here/recipe.sh"
# shellcheck source=tools/image/lib.sh
source "$here/lib.sh"

dest=${1:?usage: provision.sh DEST}
tmp="$dest.tmp"
rootfs="$tmp/rootfs"
log="$dest.log"
cache_root=$(dirname "$(dirname "$dest")")

step() { printf 'tools/bazel: [provision %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
on_error() {
  local rc=$?
  if grep -qiE 'No space left on device' "$log" 2>/dev/null; then
    die "disk full while provisioning the build image under $cache_root (see $log); free space or set STABLEOPS_CACHE_DIR to a larger disk"
  fi
  die "provisioning the build image failed (exit $rc); the last lines of $log say why"
}
trap on_error ERR

# Rewrites every absolute symbolic link under $1 into a relative one that
# points at the same file inside $1.
make_links_relative() {
  local root=$1 link target rel
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /* ]] || continue
    rel=$(realpath -m --relative-to="$(dirname "$link")" "$root$target")
    ln -sfn "$rel" "$link"
  done < <(find "$root" -type l -print0)
}

# Bazel's own bazel_tools asks the registry for four modules that nothing here
# uses; offline, empty local modules stand in for them (the approach Debian's
# own bazel-bootstrap autopkgtest takes). Applied only inside the image, in its
# system bazelrc, so the repository's MODULE.bazel resolves unchanged online.
write_bazel_offline_config() {
  local root=$1 name stubs=/opt/stableops/bazel-stubs
  for name in apple_support protobuf buildozer zlib; do
    mkdir -p "$root$stubs/$name"
    printf 'module(name = "%s")\n' "$name" >"$root$stubs/$name/MODULE.bazel"
    : >"$root$stubs/$name/BUILD.bazel"
    : >"$root$stubs/$name/WORKSPACE"
    printf 'common --override_module=%s=%s/%s\n' "$name" "$stubs" "$name" >>"$root/etc/bazel/bazelrc"
  done
}
: >"$log"

[[ $EUID -eq 0 ]] || die "provisioning the build image needs root (it runs mmdebstrap and chroot); run as root"
require_free_space "$(dirname "$dest")" 25

if ! command -v mmdebstrap >/dev/null; then
  step "installing mmdebstrap with apt-get"
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y mmdebstrap; } >>"$log" 2>&1 \
    || die "mmdebstrap is missing and 'apt-get install mmdebstrap' failed (see $log); install it, then run tools/bazel again"
fi

mirror=$(debian_mirror)
step "using the Debian mirror from this machine's apt configuration: $mirror"
check_mirror "$mirror" "$IMAGE_SUITE"

rm -rf "$tmp"
mkdir -p "$tmp"

step "creating the $IMAGE_SUITE root file system (Bazel, compilers, Python, buildbox, PostgreSQL): about 3 minutes"
# The setup hook keeps postgresql-common from creating a "main" cluster:
# tools/rbe makes a throwaway one per engine.
# shellcheck disable=SC2016  # "$1" is mmdebstrap's hook argument (the root)
mmdebstrap --variant=apt --mode=root \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --include="$(IFS=,; echo "${IMAGE_PACKAGES[*]}")" \
  --setup-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d" && echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.d/stableops.conf"' \
  --customize-hook='rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
  "$IMAGE_SUITE" "$rootfs" "$mirror" >>"$log" 2>&1

step "trusting this machine's extra CA certificates inside the image (OpenSSL and Java)"
mkdir -p "$rootfs/usr/local/share/ca-certificates"
if compgen -G '/usr/local/share/ca-certificates/*' >/dev/null; then
  cp -a /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/"
fi
copy_host_net_config "$rootfs"
copy_host_pip_config "$rootfs"
enter() { "$here/enter.sh" "$rootfs" "$tmp/ns" "$@"; }
enter -- update-ca-certificates --fresh >>"$log" 2>&1

step "creating the $SYSROOT_SUITE sysroot (glibc 2.31, libstdc++ 10)"
sysroot="$rootfs/opt/stableops/sysroot"
mkdir -p "$sysroot"
mmdebstrap --variant=extract --mode=root \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --include="$(IFS=,; echo "${SYSROOT_PACKAGES[*]}")" \
  "$SYSROOT_SUITE" "$sysroot" "$mirror" >>"$log" 2>&1
rm -rf "${sysroot:?}"/{dev,proc,sys,run,tmp,var,etc} "${sysroot:?}"/usr/share/{doc,man,locale,lintian}
# Absolute links (lib64/ld-linux-x86-64.so.2 -> /lib/...) would send the
# linker outside the sysroot: make every link relative to where it lives.
make_links_relative "$sysroot"

step "writing the offline Bazel module stubs into the image's system bazelrc"
write_bazel_offline_config "$rootfs"

for version in "${TORCH_RUNTIMES[@]}"; do
  step "creating the torch $version virtual environment (downloads about 5 GB the first time): 1-3 minutes"
  venv="/opt/stableops/venvs/torch-$version"
  mkdir -p "$cache_root/pip"
  enter --bind "$cache_root/pip:/root/.cache/pip" -- \
    sh -c "$VENV_PYTHON -m venv $venv && $venv/bin/pip install --disable-pip-version-check -q torch==$version ${VENV_PACKAGES[*]}" \
    >>"$log" 2>&1
done

step "creating the BuildGrid $BUILDGRID_VERSION virtual environment (hash-pinned: tools/image/buildgrid.lock)"
mkdir -p "$rootfs/opt/stableops"
cp "$here/buildgrid.lock" "$rootfs/opt/stableops/buildgrid.lock"
enter --bind "$cache_root/pip:/root/.cache/pip" -- \
  sh -c "$VENV_PYTHON -m venv $BUILDGRID_VENV && $BUILDGRID_VENV/bin/pip install --disable-pip-version-check -q --require-hashes --only-binary=:all: -r /opt/stableops/buildgrid.lock && $BUILDGRID_VENV/bin/bgd --help >/dev/null" \
  >>"$log" 2>&1

# The image's identity (its recipe hash), for remote-execution workers and
# the execution platform that must match them.
recipe_hash >"$rootfs/opt/stableops/image-id"

# The provisioning namespace's holder would idle for a minute more: stop it.
kill "$(cat "$tmp/ns/holder.pid" 2>/dev/null)" 2>/dev/null || true
rm -rf "$tmp/ns"
printf '%s\n' "$(recipe_hash)" >"$tmp/.provisioned"
rm -rf "$dest"
mv "$tmp" "$dest"
step "build image ready: $dest ($(du -sh "$dest" | cut -f1))"
