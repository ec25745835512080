"""GpuToolchainInfo: what a GPU compiler toolchain gives the gpu_objects rule.

A toolchain of type //bazel:gpu_toolchain_type returns
`platform_common.ToolchainInfo(gpu = GpuToolchainInfo(...))`. Two implement
it: toolchains/cuda (nvcc) and toolchains/rocm (the HIP clang); toolchain
resolution picks one from --//bazel:gpu (their `target_settings`), and none
under --//bazel:gpu=none.
"""

load("@rules_cc//cc/common:cc_info.bzl", "CcInfo")

GpuToolchainInfo = provider(
    doc = "A GPU compiler and everything needed to run it on .cu sources.",
    fields = {
        "backend": "'cuda' or 'rocm'.",
        "compiler": "File: the compiler driver, run once per source file.",
        "compiler_files": "depset of File: everything the compiler reads (toolkit, host compiler, sysroot).",
        "copts": "list of str: every flag of a compile before includes, defines and the source: language, standard, compilation-mode, architecture, host-compiler and reproducibility flags.",
        "host_only_copts": "list of str: copts for a source without device code (stable_op_library's gpu_host_srcs): the same flags with the language flags replaced by the toolchain's host_only_language_copts, so no device pass runs.",
        "quote_include_flag": "str: the flag for quote include directories ('-iquote'; nvcc has none and uses '-I').",
        "archs": "list of str: the architectures built (from --//bazel:cuda_archs or --//bazel:rocm_archs).",
        "defines": "list of str: preprocessor symbols every op source of this backend sees (//bazel:gpu_backend passes them on).",
        "runtime": "CcInfo: the GPU runtime that objects of this backend link against.",
        "test_env": "dict str -> str: environment a test that loads the objects needs (e.g. LD_LIBRARY_PATH).",
        "mnemonic": "str: the compile actions' mnemonic (NvccCompile, HipCompile).",
        "source_flags": "list of str: flags added per source after the rest, '{src}' replaced by the source's execution-root-relative path (nvcc's NVCC_SOURCE_PATH_FLAGS; none for the HIP clang).",
    },
)

def compilation_mode_copts(ctx):
    """The flags of the current --compilation_mode: ctx.attr.<mode>_copts.

    Args:
      ctx: a rule context with string_list attributes opt_copts, dbg_copts and
        fastbuild_copts.

    Returns:
      The list for ctx.var["COMPILATION_MODE"].
    """
    mode = ctx.var["COMPILATION_MODE"]
    if mode == "opt":
        return ctx.attr.opt_copts
    if mode == "dbg":
        return ctx.attr.dbg_copts
    if mode == "fastbuild":
        return ctx.attr.fastbuild_copts
    fail("stableops: expected --compilation_mode opt, dbg or fastbuild, found '{}'; pass -c opt, -c dbg or -c fastbuild".format(mode))

# Attributes both GPU toolchain rules take (the flags are written in
# toolchains/cuda/BUILD.bazel and toolchains/rocm/BUILD.bazel).
GPU_TOOLCHAIN_ATTRS = {
    "language_copts": attr.string_list(doc = "The flags that make a source GPU code, first in every compile of gpu_srcs (nvcc: -x cu; the HIP clang: -x hip)."),
    "host_only_language_copts": attr.string_list(doc = "What replaces language_copts for gpu_host_srcs, sources with no device code: compiled for the host only, no device pass (nvcc: -x c++; the HIP clang: -x hip --offload-host-only)."),
    "copts": attr.string_list(doc = "Flags of every compile after the language flags (standard, codegen)."),
    "opt_copts": attr.string_list(doc = "Added under -c opt (the default, --config=cuda/rocm)."),
    "dbg_copts": attr.string_list(doc = "Added under -c dbg (--config=dbg)."),
    "fastbuild_copts": attr.string_list(doc = "Added under -c fastbuild."),
    "defines": attr.string_list(doc = "Preprocessor symbols every op source of this backend sees."),
    "runtime": attr.label(providers = [CcInfo], mandatory = True, doc = "The GPU runtime library objects link against."),
    "toolkit": attr.label(allow_files = True, mandatory = True, doc = "Every file the compiler reads (headers, device libraries, helpers)."),
}
