#!/usr/bin/env bash
# tools/rbe/export_image.sh: exports this checkout's build image for an
# organisation's remote-execution workers (docs/REMOTE_EXECUTION.md).
#
#   tools/rbe/export_image.sh --tar FILE                  a root file system tarball
#   tools/rbe/export_image.sh --oci DIR [--compress ALG]  an OCI image layout
#
# --tar writes the image's root file system as one uncompressed tar (numeric
# owners, hard links, extended attributes), what `docker import` / `podman
# import` take. --oci writes an OCI image layout (umoci, from the image: init,
# new, raw add-layer of that tar, config) with one layer, tagged with the
# image's identity (/opt/stableops/image-id) and labelled with it
# (dev.stableops.image-id), ready for `skopeo copy oci:DIR:<id>
# docker://REGISTRY/...` or `umoci unpack`. ALG: gzip (default), zstd or
# none.
#
# Left out: the contents of /tmp (engines' run directories, scratch), /proc,
# /sys, /dev and /run, which a container runtime provides. The image is
# provisioned first if needed (through tools/bazel). It takes a while: the
# image is 13 GB (the layer, gzip: about 5 GB).
#
# Environment: STABLEOPS_CACHE_DIR as for tools/bazel.
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
# shellcheck source=tools/image/lib.sh
source "$workspace/tools/image/lib.sh"

usage="usage: tools/rbe/export_image.sh --tar FILE | --oci DIR [--compress gzip|zstd|none]"
mode='' out='' compress=gzip
while (($#)); do
  case $1 in
    --tar | --oci) mode=${1#--}; out=${2:-}; shift 2 || die "$usage" ;;
    --compress) compress=${2:-}; shift 2 || die "$usage" ;;
    *) die "unknown argument '$1'; $usage" ;;
  esac
done
[[ -n $mode && -n $out ]] || die "$usage"
[[ $compress =~ ^(gzip|zstd|none)$ ]] || die "--compress must be gzip, zstd or none, found '$compress'"
[[ $EUID -eq 0 ]] || die "exporting reads the whole image (root-owned files) and runs umoci inside it; run as root"

cache=${STABLEOPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stableops}
image="$cache/images/$(recipe_hash)"
if [[ ! -f $image/.provisioned ]]; then
  echo "export_image: provisioning the build image first (tools/bazel)" >&2
  STABLEOPS_IMAGE_ONLY=1 "$workspace/tools/bazel" version >/dev/null
fi
rootfs="$image/rootfs"
image_id=$(<"$rootfs/opt/stableops/image-id")

# write_tar FILE: the root file system as an uncompressed tar.
write_tar() {
  tar --create --file="$1" --numeric-owner --xattrs --xattrs-include='*' --acls \
    --directory="$rootfs" --exclude='./tmp/*' --exclude='./proc/*' --exclude='./sys/*' \
    --exclude='./dev/*' --exclude='./run/*' .
}

start=$SECONDS
case $mode in
  tar)
    mkdir -p "$(dirname "$out")"
    echo "export_image: writing $out (image $image_id)" >&2
    write_tar "$out.partial"
    mv -f "$out.partial" "$out"
    ;;
  oci)
    [[ ! -e $out ]] || die "expected --oci DIR not to exist (an OCI layout is written there), found $out; remove it or choose another"
    mkdir -p "$out"
    out=$(cd "$out" && pwd -P)
    trap 'rm -f "$out/.layer.tar"' EXIT
    echo "export_image: writing the layer tar (image $image_id)" >&2
    write_tar "$out/.layer.tar"
    echo "export_image: umoci: OCI layout in $out, tag $image_id, layer compressed with $compress" >&2
    # umoci comes from the image (its Debian package): run it there, with the
    # output directory bound in.
    # shellcheck disable=SC2016  # $1 and $2 expand in the image's shell
    "$workspace/tools/image/enter.sh" "$rootfs" "$cache/ns/$(basename "$image")" \
      --bind "$out:/tmp/stableops-export" -- sh -euc '
        cd /tmp/stableops-export
        umoci init --layout layout.tmp
        umoci new --image "layout.tmp:$1"
        umoci raw add-layer --compress "$2" --image "layout.tmp:$1" \
          --history.created_by "tools/rbe/export_image.sh" .layer.tar
        umoci config --image "layout.tmp:$1" \
          --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
          --config.env LANG=C.UTF-8 --config.workingdir / --config.cmd /bin/bash \
          --config.label "dev.stableops.image-id=$1" \
          --config.label org.opencontainers.image.title=stableops-build-image
        umoci gc --layout layout.tmp
      ' export "$image_id" "$compress"
    # The layout's files, moved up into DIR itself.
    mv "$out/layout.tmp"/* "$out/"
    rmdir "$out/layout.tmp"
    ;;
esac
echo "export_image: done in $((SECONDS - start)) s: $out ($(du -sh "$out" | cut -f1))" >&2
