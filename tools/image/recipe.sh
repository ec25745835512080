# The build image, pinned: the one place where its package versions live.
#
# tools/bazel hashes this file together with tools/image/provision.sh and
# tools/image/buildgrid.lock; any change to one of them provisions a new image
# (images neither current nor used recently are removed once the new one is
# ready, see tools/bazel). Versions are exact: when Debian sid drops one, provisioning
# fails naming the package, and the fix is to bump it here.
# shellcheck shell=bash disable=SC2034,SC2191
# (SC2034: the arrays are read by provision.sh; SC2191: "name=version" entries
# are literal package pins, not array assignments.)

# Debian sid root file system (mmdebstrap --variant=apt).
IMAGE_SUITE=sid
IMAGE_PACKAGES=(
  # Bazel 7 and the Debian-packaged rules it overrides modules with.
  bazel-bootstrap=7.7.1+ds-8+b1
  bazel-rules-cc=0.0.11-3
  bazel-rules-python=0.22.1-3
  bazel-platforms=0.0.10-4
  bazel-skylib=1.9.1-2
  default-jre-headless
  ca-certificates
  ca-certificates-java
  # The hermetic C++ toolchain's compiler (also nvcc's host compiler).
  clang-19=1:19.1.7-22+b1
  lld-19=1:19.1.7-22+b1
  # ROCm: HIP compiler, runtime and device libraries.
  hipcc=7.0.2+dfsg-3
  libamdhip64-dev=6.4.3-5
  rocm-device-libs-21=7.0.2+dfsg-3
  clang-21=1:21.1.8-14
  llvm-21=1:21.1.8-14
  # Python for Bazel's py rules and the torch runtimes; g++ and the Python
  # headers let torch.compile (inductor) build its CPU kernels in tests.
  python3.14=3.14.10-1
  python3.14-venv=3.14.10-1
  python3.14-dev=3.14.10-1
  python3
  g++
  binutils
  patchelf
  zip
  unzip
  # Remote execution (tools/rbe, docs/REMOTE_EXECUTION.md): the buildbox
  # workers (buildbox-casd, buildbox-worker, buildbox-run-*), their sandbox,
  # PostgreSQL for BuildGrid's scheduler (it refuses SQLite), and umoci to
  # export this image as an OCI layout (tools/rbe/export_image.sh).
  buildbox=1.4.30+dfsg-1+b1
  bubblewrap=0.13.1-1
  postgresql-18=18.6-3
  postgresql=18+293
  umoci=0.6.0+ds-1+b1
)

# Bullseye sysroot (glibc 2.31, libstdc++ 10): what every shared object links
# against, so none needs a glibc symbol newer than 2.17 (mmdebstrap
# --variant=extract: the listed packages only, no maintainer scripts).
SYSROOT_SUITE=bullseye
SYSROOT_PACKAGES=(
  libc6=2.31-13+deb11u11
  libc6-dev=2.31-13+deb11u11
  libgcc-s1=10.2.1-6
  libgcc-10-dev=10.2.1-6
  libstdc++6=10.2.1-6
  libstdc++-10-dev=10.2.1-6
  linux-libc-dev=5.10.223-1
  libcrypt1=1:4.4.18-4
  libcrypt-dev=1:4.4.18-4
)

# Python virtual environments, one per torch runtime. The first one is the
# default interpreter (headers + libtorch_cpu.so the build links against).
VENV_PYTHON=python3.14
TORCH_RUNTIMES=(2.13.0 2.11.0)
VENV_PACKAGES=(
  pytest==9.2.0
  absl-py==2.5.1
  numpy==2.4.6
  expecttest==0.3.0
)

# BuildGrid (the remote-execution server of tools/rbe) in a virtual
# environment of its own at /opt/stableops/buildgrid, from PyPI: it needs
# Python >= 3.13. Every distribution is pinned with its sha256 in
# tools/image/buildgrid.lock (regenerate it with tools/image/lock_buildgrid.sh
# after changing the version) and installed with --require-hashes.
BUILDGRID_VERSION=0.9.1
BUILDGRID_VENV=/opt/stableops/buildgrid
