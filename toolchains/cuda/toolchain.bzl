"""cuda_toolchain: nvcc as the GPU toolchain of --config=cuda.

The instance and its flags are in toolchains/cuda/BUILD.bazel; this rule adds
what depends on the configuration: the compilation-mode flags, the host
compiler (the hermetic clang of @stableops_cc, with its bullseye sysroot, so
CUDA objects keep the C++ objects' glibc ceiling), the reproducibility flags
of //toolchains:reproducible.bzl, --threads from --//bazel:nvcc_threads and
one -gencode per --//bazel:cuda_archs entry.
"""

load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain", "use_cc_toolchain")
load("@rules_cc//cc/common:cc_info.bzl", "CcInfo")
load("//toolchains:gpu_toolchain_info.bzl", "GPU_TOOLCHAIN_ATTRS", "GpuToolchainInfo", "compilation_mode_copts")
load("//toolchains:reproducible.bzl", "NVCC_REPRODUCIBLE_FLAGS", "NVCC_SOURCE_PATH_FLAGS", "REPRODUCIBLE_DEFINES", "REPRODUCIBLE_WARNING_FLAGS")

def parse_cuda_archs(value):
    """'sm_80, sm_90a,compute_120' -> ['sm_80', 'sm_90a', 'compute_120'], failing on anything else.

    Args:
      value: the --//bazel:cuda_archs string.

    Returns:
      The architectures, in order.
    """
    archs = [a.strip() for a in value.split(",") if a.strip()]
    for arch in archs:
        if not (arch.startswith("sm_") or arch.startswith("compute_")) or arch == "native":
            fail("stableops: expected CUDA architectures like sm_90a or compute_120 in --//bazel:cuda_archs, found '{}'; set it to a comma-separated list of them".format(arch))
    if not archs:
        fail("stableops: --//bazel:cuda_archs is empty; name at least one architecture (e.g. sm_90a)")
    return archs

def _gencode(arch):
    # sm_XX: machine code for XX; compute_XX: PTX for XX, which the driver
    # compiles for newer GPUs.
    kind, _, num = arch.partition("_")
    return "-gencode=arch=compute_{num},code={kind}_{num}".format(kind = kind, num = num)

def _cuda_toolchain_impl(ctx):
    cc_toolchain = find_cc_toolchain(ctx)
    archs = parse_cuda_archs(ctx.attr.archs[BuildSettingInfo].value)
    threads = ctx.attr.threads[BuildSettingInfo].value
    if threads < 0:
        fail("stableops: expected --//bazel:nvcc_threads >= 0 (0: one per CPU), found {}; set it to 0, 1 or a thread count".format(threads))
    host_flags = ["-fPIC", "--sysroot=" + cc_toolchain.sysroot, "-Wno-unused-command-line-argument"] + REPRODUCIBLE_WARNING_FLAGS
    common = (
        ctx.attr.copts +
        compilation_mode_copts(ctx) +
        ["-ccbin", cc_toolchain.compiler_executable, "-Xcompiler=" + ",".join(host_flags)] +
        ["-D" + d for d in REPRODUCIBLE_DEFINES] +
        NVCC_REPRODUCIBLE_FLAGS +
        ["--threads", str(threads)] +
        [_gencode(a) for a in archs]
    )
    return [platform_common.ToolchainInfo(gpu = GpuToolchainInfo(
        backend = "cuda",
        compiler = ctx.file.nvcc,
        compiler_files = depset(transitive = [ctx.attr.toolkit[DefaultInfo].files, cc_toolchain.all_files]),
        copts = ctx.attr.language_copts + common,
        host_only_copts = ctx.attr.host_only_language_copts + common,
        # nvcc has no -iquote.
        quote_include_flag = "-I",
        archs = archs,
        defines = ctx.attr.defines,
        runtime = ctx.attr.runtime[CcInfo],
        test_env = {},
        mnemonic = "NvccCompile",
        source_flags = NVCC_SOURCE_PATH_FLAGS,
    ))]

cuda_toolchain = rule(
    implementation = _cuda_toolchain_impl,
    doc = "nvcc as a //bazel:gpu_toolchain_type toolchain (see toolchains/cuda/BUILD.bazel).",
    attrs = dict(GPU_TOOLCHAIN_ATTRS, **{
        "nvcc": attr.label(allow_single_file = True, executable = True, cfg = "exec", mandatory = True, doc = "The nvcc driver."),
        "archs": attr.label(default = "//bazel:cuda_archs", providers = [BuildSettingInfo], doc = "The --//bazel:cuda_archs setting."),
        "threads": attr.label(default = "//bazel:nvcc_threads", providers = [BuildSettingInfo], doc = "The --//bazel:nvcc_threads setting (nvcc --threads)."),
    }),
    toolchains = use_cc_toolchain(),
    fragments = ["cpp"],
)
