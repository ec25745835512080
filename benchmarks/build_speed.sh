#!/usr/bin/env bash
# benchmarks/build_speed.sh: times Bazel builds of //python:wheel against the
# usual setuptools build of the same sources. Not run in CI (it takes several
# minutes of CPU); results go into docs/PERFORMANCE.md by hand.
#
#   benchmarks/build_speed.sh [extra bazel build flags]
#
# Steps, all on a throwaway clone of this checkout's HEAD (the checkout itself
# and its output base are never touched):
#   (a) cold   : `bazel build //python:wheel` in a fresh output base, no disk
#                cache, no remote cache (the repository cache, which holds only
#                downloaded archives by hash, is kept, as in
#                tools/check_reproducible_wheel.sh; includes the Bazel server's
#                start);
#   (b) no-op  : the same build again in the same output base;
#   (c0)       : appends a comment line to csrc/cache/swap_blocks.cu (a real content
#                change: Bazel keys actions on content, so `touch` would be a
#                no-op) and rebuilds; the recompiled object is byte-identical,
#                so Bazel skips the link: one action runs;
#   (c) one .cu: then appends a line of code (a hidden host variable) to the
#                same file and rebuilds; from the execution log, checks that
#                the only actions run were that file's compile(s) (and the
#                archive of its object), the link of the shared object and
#                what packages it (the wheel);
#   (d) remote : starts nginx (Debian's, with its DAV module, as
#                tools/remote_cache_test.sh does) on loopback, fills it with a
#                --config=remote build in one fresh output base (not timed),
#                then times a build in another fresh output base, no disk
#                cache, --config=remote;
#   (e) pip    : `pip wheel .` of a setup.py generated into a temp dir (never
#                committed) using torch.utils.cpp_extension.CUDAExtension on
#                csrc/**/*.cpp and csrc/**/*.cu (the .cu files that Bazel
#                compiles for the host only, stable_op_library's gpu_host_srcs,
#                as C++ through a generated one-line .cpp that includes them,
#                so both builds skip their device passes), for the same CUDA
#                architectures as
#                the default --//bazel:cuda_archs (TORCH_CUDA_ARCH_LIST below),
#                MAX_JOBS=2, run inside the build image with torch 2.13.0's
#                venv, the hermetic nvcc from (a)'s output base and the image's
#                clang 19 + bullseye sysroot as host compiler (nvcc 13 rejects
#                sid's g++ 16, and sid's glibc 2.43 headers break nvcc).
#                ninja is pip-installed into a temp dir first (not timed) so
#                cpp_extension compiles in parallel as it does in most projects.
# Each step prints its time; the end prints a table with every time and its
# ratio to (e). Needs root (tools/bazel's image), nginx (installed with
# apt-get by tools/remote_cache_test.sh's recipe if missing) and about 3 GB
# under STABLEOPS_CACHE_DIR; everything temporary is removed at the end.
# Environment: BUILD_SPEED_KEEP=1 keeps the scratch directory (logs).
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$workspace"
cache=${STABLEOPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stableops}
mkdir -p "$cache/bazel"
# shellcheck source=tools/image/lib.sh
source "$workspace/tools/image/lib.sh"
# shellcheck source=tools/nginx_cache.sh
source "$workspace/tools/nginx_cache.sh"
rootfs="$cache/images/$(recipe_hash)/rootfs"

say() { printf 'build_speed: %s\n' "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }

[[ $EUID -eq 0 ]] || fail "needs root (tools/bazel's build image, chroot)"
command -v nginx >/dev/null || fail "needs nginx with the DAV module (apt-get install nginx)"

# Output bases and the clone live under $cache/bazel: tools/bazel mounts it.
scratch=$(mktemp -d "$cache/bazel/build-speed.XXXXXX")
src="$scratch/src"
nginx_pid=
bases=()
url=

cleanup() {
  set +e
  if [[ -n $nginx_pid ]]; then
    kill "$nginx_pid" 2>/dev/null
    wait "$nginx_pid" 2>/dev/null
  fi
  local base
  for base in "${bases[@]}"; do
    (cd "$src" && ./tools/bazel --output_base="$base" shutdown >/dev/null 2>&1)
  done
  [[ -n $url ]] && rm -f "$cache/bazel/image.remote-$(printf '%s' "$url" | sha256sum | cut -c1-12).bazelrc"
  if [[ -n ${BUILD_SPEED_KEEP:-} ]]; then
    say "scratch kept in $scratch"
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT

git clone -q --no-hardlinks "$workspace" "$src"
git -C "$src" checkout -q --detach "$(git rev-parse HEAD)"
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  say "note: uncommitted changes are not measured; the clone is of HEAD"

declare -A took
summary() { grep -E '^INFO: [0-9]+ processes' "$1" | tail -n1 || true; }

bazel_build() {  # bazel_build NAME OUTPUT_BASE [flags...]: logs to $scratch/NAME.log
  local name=$1 base=$2
  shift 2
  (cd "$src" && ./tools/bazel --output_base="$base" build //python:wheel \
    --disk_cache= --symlink_prefix=/ --color=no --curses=no \
    --execution_log_json_file="$scratch/$name.exec.json" "$@") 2>"$scratch/$name.log" ||
    { tail -n 30 "$scratch/$name.log" >&2; fail "build $name failed (log: $scratch/$name.log)"; }
}

timed() {  # timed KEY NAME OUTPUT_BASE [flags...]
  local key=$1
  shift
  local t0 t1
  t0=$(now)
  bazel_build "$@"
  t1=$(now)
  took[$key]=$(secs "$t0" "$t1")
  say "($key) $1: ${took[$key]} s; $(summary "$scratch/$1.log")"
}

# --- (a) cold, (b) no-op ----------------------------------------------------
base_a="$scratch/base-a"
bases+=("$base_a")
timed a cold "$base_a" --remote_cache= "$@"
timed b noop "$base_a" --remote_cache= "$@"

# --- (c) one .cu file changed ---------------------------------------------
# The edited file: a kernel source of about the median compile time
# (csrc/utils/cuda_utils.cu until 2026-12-06, when it became host-only),
# and the archive of its stable_op_library's GPU objects.
edit=csrc/cache/swap_blocks.cu
edit_archive=libcache_ops_gpu.pic
# check_c EXEC_JSON MODE: the actions that ran were only $edit's
# compile(s) (and its archive), the .so's link and the wheel (MODE=comment:
# the compile alone is also fine: an unchanged object lets Bazel skip the
# link).
check_c() {
  local extra=()
  [[ $2 == comment ]] && extra=(--no_link_ok)
  python3 "$workspace/tools/exec_log.py" only_rebuilt "$1" "$(basename "$edit" .cu)" --archive="$edit_archive" "${extra[@]}"
}
# c0: a comment line only (the object does not change).
printf '// build_speed.sh: a comment line\n' >>"$src/$edit"
timed c0 one_cu_comment "$base_a" --remote_cache= "$@"
c0_check=$(check_c "$scratch/one_cu_comment.exec.json" comment)
say "(c0) check: $c0_check"
# c: a code change (one more host symbol: the object and the .so change).
printf 'extern "C" __attribute__((visibility("hidden"))) int stableops_build_speed_edit = 1;\n' >>"$src/$edit"
timed c one_cu "$base_a" --remote_cache= "$@"
c_check=$(check_c "$scratch/one_cu.exec.json" code)
say "(c) check: $c_check"
git -C "$src" checkout -q -- "$edit"

# --- (d) cold build from a warm remote cache --------------------------------
start_nginx_cache "$scratch/nginx"
export STABLEOPS_REMOTE_CACHE=$url
base_fill="$scratch/base-fill"
base_d="$scratch/base-d"
bases+=("$base_fill" "$base_d")
say "filling the remote cache at $url (not timed)"
t0=$(now)
bazel_build fill "$base_fill" --config=remote "$@"
say "fill took $(secs "$t0" "$(now)") s; $(summary "$scratch/fill.log")"
(cd "$src" && ./tools/bazel --output_base="$base_fill" shutdown >/dev/null 2>&1) || true
timed d remote "$base_d" --config=remote "$@"
unset STABLEOPS_REMOTE_CACHE

# --- (e) pip wheel . with torch.utils.cpp_extension --------------------------
cuda="$base_a/external/+cuda+stableops_cuda/cuda"
[[ -x $cuda/bin/nvcc ]] || fail "no nvcc at $cuda/bin/nvcc"
pipdir="$scratch/pip"
mkdir -p "$pipdir/proj/stableops_setuptools" "$pipdir/cuda_home/lib64" "$pipdir/bin" "$pipdir/wheels"
cp -r "$src/csrc" "$pipdir/proj/csrc"
touch "$pipdir/proj/stableops_setuptools/__init__.py"
ln -s "$cuda/bin" "$pipdir/cuda_home/bin"
ln -s "$cuda/include" "$pipdir/cuda_home/include"
ln -s "$cuda/nvvm" "$pipdir/cuda_home/nvvm"
ln -s "$cuda/lib/libcudart.so.13" "$pipdir/cuda_home/lib64/libcudart.so"
for f in "$cuda"/lib/*; do ln -sf "$f" "$pipdir/cuda_home/lib64/$(basename "$f")"; done
ln -sf "$cuda/lib/libcudart.so.13" "$pipdir/cuda_home/lib64/libcudart.so"
# Named clang/clang++ and found on PATH: cpp_extension checks the compiler
# version against CUDA's bounds for clang only when CC's name starts "clang".
printf '#!/bin/sh\nexec /usr/lib/llvm-19/bin/clang --sysroot=/opt/stableops/sysroot "$@"\n' >"$pipdir/bin/clang"
printf '#!/bin/sh\nexec /usr/lib/llvm-19/bin/clang++ --sysroot=/opt/stableops/sysroot "$@"\n' >"$pipdir/bin/clang++"
chmod +x "$pipdir/bin/clang" "$pipdir/bin/clang++"
# "2.11" -> 0x020B000000000000, as toolchains/torch/version.bzl does.
hex=$(python3 - "$src/toolchains/torch/version.bzl" <<'PY'
import re, sys
v = re.search(r'^DEFAULT_TORCH_TARGET_VERSION = "(\d+)\.(\d+)"', open(sys.argv[1]).read(), re.M)
print(f"0x{int(v.group(1)):02X}{int(v.group(2)):02X}000000000000")
PY
)
# --//bazel:cuda_archs default sm_80,sm_86,sm_89,sm_90a,sm_100,sm_120,compute_120
archs=$(sed -nE '/name = "cuda_archs"/,/\)/s/.*build_setting_default = "([^"]+)".*/\1/p' "$src/bazel/BUILD.bazel")
arch_list=$(python3 - "$archs" <<'PY'
import sys
archs = [a.strip() for a in sys.argv[1].split(",") if a.strip()]
sm = [a[3:] for a in archs if a.startswith("sm_")]
ptx = {a[8:] for a in archs if a.startswith("compute_")}
out = []
for n in sm:
    suffix = "a" if n.endswith("a") else ""
    digits = n.rstrip("a")
    s = f"{digits[:-1]}.{digits[-1]}{suffix}"
    if digits in ptx:
        s += "+PTX"
        ptx.discard(digits)
    out.append(s)
for p in sorted(ptx):
    out.append(f"{p[:-1]}.{p[-1]}+PTX")
print(";".join(out))
PY
)
say "(e) TORCH_CUDA_ARCH_LIST=$arch_list (from cuda_archs=$archs), TORCH_TARGET_VERSION=$hex"
# gpu_host_srcs of every csrc BUILD file, as a Python list literal.
host_only=$(python3 - "$src" <<'PY'
import glob, os, re, sys
root = sys.argv[1]
found = []
for build in sorted(glob.glob(f"{root}/csrc/**/BUILD.bazel", recursive=True)):
    pkg = os.path.relpath(os.path.dirname(build), root)
    for block in re.findall(r"gpu_host_srcs = \[(.*?)\]", open(build).read(), re.S):
        found += [f"{pkg}/{f}" for f in re.findall(r'"([^"]+)"', block)]
print(repr(found))
PY
)
say "(e) host-only GPU sources (compiled as C++): $host_only"
cat >"$pipdir/proj/setup.py" <<EOF
# Generated by benchmarks/build_speed.sh; throwaway, never committed.
import glob
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

# Bazel's gpu_host_srcs: no kernels, so C++ with the CUDA headers (no nvcc
# device passes), as Bazel compiles them.
HOST_ONLY = $host_only
for path in HOST_ONLY:
    with open(path[: -len(".cu")] + "_host_only.cpp", "w") as f:
        f.write(f'#include "{path}"\\n')

setup(
    name="stableops_setuptools",
    version="0.0.0",
    packages=["stableops_setuptools"],
    ext_modules=[CUDAExtension(
        "stableops_setuptools._C",
        sources=sorted(glob.glob("csrc/**/*.cpp", recursive=True))
        + sorted(p for p in glob.glob("csrc/**/*.cu", recursive=True) if p not in HOST_ONLY),
        # Absolute: ninja compiles from the build directory, where "." is not
        # the project (the sources include "csrc/...").
        include_dirs=[os.path.dirname(os.path.abspath(__file__))],
        define_macros=[("STABLEOPS_WITH_GPU", None), ("USE_CUDA", None),
                       ("TORCH_TARGET_VERSION", "$hex")],
        extra_compile_args={"cxx": ["-O3", "-std=c++17"],
                            "nvcc": ["-O3", "-std=c++17", "--expt-relaxed-constexpr"]},
        libraries=["dl"],
    )],
    cmdclass={"build_ext": BuildExtension},
)
EOF
venv=/opt/stableops/venvs/torch-2.13.0
in_pip() {  # runs a shell command inside the build image, in $pipdir/proj
  "$workspace/tools/image/enter.sh" "$rootfs" "$scratch/ns" --bind "$cache/bazel" --chdir "$pipdir/proj" -- \
    /usr/bin/env PATH="$pipdir/bin:$pipdir/pydeps/bin:$venv/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    PYTHONPATH="$pipdir/pydeps" CUDA_HOME="$pipdir/cuda_home" CC=clang CXX=clang++ \
    TORCH_CUDA_ARCH_LIST="$arch_list" MAX_JOBS=2 /bin/bash -c "$1"
}
copy_host_net_config "$rootfs"
copy_host_pip_config "$rootfs"
if in_pip "python -m pip install -q --no-deps --target $pipdir/pydeps ninja" >"$scratch/ninja.log" 2>&1; then
  say "(e) ninja $(in_pip 'ninja --version' 2>/dev/null) installed into a temp dir (not timed)"
else
  say "(e) could not pip-install ninja (see below); cpp_extension compiles one file at a time"
  tail -n 5 "$scratch/ninja.log" >&2
fi
t0=$(now)
in_pip "python -m pip wheel --no-build-isolation --no-deps -v -w $pipdir/wheels ." >"$scratch/pip.log" 2>&1 ||
  { tail -n 40 "$scratch/pip.log" >&2; fail "(e) pip wheel failed (log: $scratch/pip.log)"; }
t1=$(now)
took[e]=$(secs "$t0" "$t1")
say "(e) pip wheel: ${took[e]} s; $(ls "$pipdir/wheels")"

# --- table ----------------------------------------------------------------
echo
echo "| step | time (s) | ratio to (e) |"
echo "| --- | ---: | ---: |"
for k in a b c0 c d e; do
  case $k in
    a) name="(a) cold \`bazel build //python:wheel\` (fresh output base, no disk/remote cache)" ;;
    b) name="(b) no-op rebuild" ;;
    c0) name="(c0) rebuild after appending a comment line to $edit" ;;
    c) name="(c) rebuild after appending a line of code to $edit" ;;
    d) name="(d) cold build (fresh output base, no disk cache) from a warm remote cache" ;;
    e) name="(e) \`pip wheel .\` with torch.utils.cpp_extension (MAX_JOBS=2)" ;;
  esac
  echo "| $name | ${took[$k]} | $(python3 -c "print(f'{float(\"${took[$k]}\") / float(\"${took[e]}\"):.3f}')") |"
done
echo
echo "(c0): $c0_check"
echo "(c): $c_check"
echo "(d) speed-up over (a): $(python3 -c "print(f'{float(\"${took[a]}\") / float(\"${took[d]}\"):.1f}x')")"
