#!/bin/bash
# tools/rbe/bwrap.sh: what buildbox-run-bubblewrap runs as `bwrap` on the
# workers of tools/rbe/engine.sh (engine.sh copies it into the run directory
# and puts it first on the workers' PATH). It adapts the runner's command line
# to the build image, then runs the real /usr/bin/bwrap:
#
#  1. Drops --unshare-user, --uid N and --gid N. The runner always asks for a
#     user namespace, and the kernel refuses one to a chrooted process (the
#     image is entered with chroot); the workers run as root in the initial
#     user namespace, where bwrap needs none to unshare the mount, PID,
#     network, IPC and UTS namespaces, and uid/gid 0 is what the action would
#     have been mapped to anyway. --cap-drop ALL still applies.
#  2. Mounts the action's input root at /execroot instead of / (and runs the
#     command there: --chdir /X becomes /execroot/X), on a root made of the
#     image's /usr, /etc and /opt, read-only, and the merged-/usr links (/bin,
#     /lib, /lib64, /sbin). Actions name the image's compilers and
#     interpreters by absolute path (/usr/lib/llvm-19/bin/clang,
#     /opt/stableops/venvs/...), and a working directory of / breaks them:
#     "$PWD/bazel-out/..." becomes "//bazel-out/...", which Python's pathlib
#     keeps as a root of its own (pytest then fails to relate paths).
#     Everything else stays the runner's: a fresh /tmp, /proc and /dev, no
#     network, no capabilities.
#
# Options are read with their arities up to the command, which is passed on
# untouched; an option this does not know fails the action with one line.
set -euo pipefail

root=/execroot
args=()
while (($#)); do
  case $1 in
    --unshare-user) shift ;;
    --uid | --gid) shift 2 ;;
    --bind)
      if [[ $3 == / ]]; then
        args+=(--ro-bind /usr /usr --ro-bind /etc /etc --ro-bind /opt /opt
          --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin
          --bind "$2" "$root")
      else
        args+=("$1" "$2" "$3")
      fi
      shift 3
      ;;
    --chdir)
      args+=(--chdir "$root${2%/}")
      shift 2
      ;;
    --unshare-* | --share-net | --die-with-parent | --new-session | --as-pid-1 | --clearenv) args+=("$1"); shift ;;
    --hostname | --cap-add | --cap-drop | --unsetenv | --proc | --dev | --tmpfs | --dir | --remount-ro | --mqueue)
      args+=("$1" "$2")
      shift 2
      ;;
    --setenv | --ro-bind | --dev-bind | --symlink | --bind-try | --ro-bind-try | --dev-bind-try)
      args+=("$1" "$2" "$3")
      shift 3
      ;;
    --) args+=("$@"); break ;;
    -*)
      echo "tools/rbe/bwrap.sh: unexpected bwrap option '$1' from buildbox-run-bubblewrap; teach tools/rbe/bwrap.sh its arity" >&2
      exit 125
      ;;
    *) args+=("$@"); break ;;
  esac
done
exec /usr/bin/bwrap "${args[@]}"
