"""Compile flags that make objects reproducible: defined here once.

The C++ toolchain (toolchains/cc/config.bzl), the CUDA toolchain
(toolchains/cuda/toolchain.bzl) and the HIP toolchain
(toolchains/rocm/toolchain.bzl) all apply them, so the same sources give the
same bytes on every machine and at every time (tools/check_reproducible_wheel.sh
checks the wheel). Paths need no remapping: every action names sources, the
sysroot and the toolkits by paths relative to the execution root (nvcc, which
resolves them itself, is told the relative path: NVCC_SOURCE_PATH_FLAGS).
"""

# No dates in objects: __DATE__ and friends expand to a constant. Every
# compiler here is clang (directly, or as nvcc's host compiler), which warns
# about redefining builtin macros unless told not to.
REPRODUCIBLE_DEFINES = [
    "__DATE__=\"redacted\"",
    "__TIMESTAMP__=\"redacted\"",
    "__TIME__=\"redacted\"",
]

# The clang warning those redefinitions raise, silenced (nvcc passes it to its
# host compiler with -Xcompiler).
REPRODUCIBLE_WARNING_FLAGS = ["-Wno-builtin-macro-redefined"]

# Both, as flags of a clang command line (C++ and HIP compiles).
REPRODUCIBLE_COPTS = REPRODUCIBLE_WARNING_FLAGS + ["-D" + d for d in REPRODUCIBLE_DEFINES]

# nvcc names its intermediate files tmpxft_<pid in hex>_..., and the host
# compiler bakes that name into the object (the STT_FILE symbol and the
# static initialiser _GLOBAL__sub_I_tmpxft_<pid>_..._<src>.cudafe1.cpp), so
# every build of the same .cu file gave a different object. With
# --objdir-as-tempdir they are written next to the output, named after it: the
# name depends only on the output's path, which is unique per action.
NVCC_REPRODUCIBLE_FLAGS = ["--objdir-as-tempdir"]

# nvcc passes cudafe++ and cicc the source's real path (symbolic links
# resolved: the workspace, a clone, a remote worker's staging directory) as
# --orig_src_path_name, and both hash it into the names of internal-linkage
# entities (_INTERNAL_<hash>_13_cuda_utils_cu_...), host and device code: the
# same .cu file gave different objects in two clones, and on a remote worker.
# Given again (the last one counts), the source's execution-root-relative path
# ({src}, filled in per source by gpu_objects) makes them path-independent.
# -Xcicc is nvcc's (undocumented) pass-through to the device front end.
NVCC_SOURCE_PATH_FLAGS = [
    "-Xcudafe",
    "--orig_src_path_name={src}",
    "-Xcicc",
    "--orig_src_path_name={src}",
]

# Linker flags: no build id (it hashes the output, but differs between linkers
# and is pointless for a wheel).
REPRODUCIBLE_LINKOPTS = ["-Wl,--build-id=none"]
