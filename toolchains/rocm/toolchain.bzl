"""hip_toolchain: the HIP clang as the GPU toolchain of --config=rocm.

The instance and its flags are in toolchains/rocm/BUILD.bazel; this rule adds
what depends on the configuration: the compilation-mode flags, the sysroot of
the hermetic C++ toolchain (host code keeps the C++ objects' glibc ceiling),
--rocm-path (the minimal ROCm tree of @stableops_rocm, so no header of the
image leaks in), the reproducibility flags of //toolchains:reproducible.bzl
and one --offload-arch per --//bazel:rocm_archs entry.
"""

load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain", "use_cc_toolchain")
load("@rules_cc//cc/common:cc_info.bzl", "CcInfo")
load("//toolchains:gpu_toolchain_info.bzl", "GPU_TOOLCHAIN_ATTRS", "GpuToolchainInfo", "compilation_mode_copts")
load("//toolchains:reproducible.bzl", "REPRODUCIBLE_COPTS")

def parse_rocm_archs(value):
    """'gfx90a, gfx942' -> ['gfx90a', 'gfx942'], failing on anything else.

    Args:
      value: the --//bazel:rocm_archs string.

    Returns:
      The architectures, in order (feature suffixes such as gfx90a:xnack+ kept).
    """
    archs = [a.strip() for a in value.split(",") if a.strip()]
    for arch in archs:
        if not arch.startswith("gfx"):
            fail("stableops: expected AMD GPU architectures like gfx942 in --//bazel:rocm_archs, found '{}'; set it to a comma-separated list of them (never native: builds do not depend on the build machine's GPU)".format(arch))
    if not archs:
        fail("stableops: --//bazel:rocm_archs is empty; name at least one architecture (e.g. gfx942)")
    return archs

def _hip_toolchain_impl(ctx):
    cc_toolchain = find_cc_toolchain(ctx)
    archs = parse_rocm_archs(ctx.attr.archs[BuildSettingInfo].value)

    # --rocm-path: the directory holding include/hip/hip_runtime.h, relative
    # to the execution root like the sysroot.
    suffix = "/include/hip/hip_runtime.h"
    roots = [f.path[:-len(suffix)] for f in ctx.files.toolkit if f.path.endswith("/rocm" + suffix)]
    if len(roots) != 1:
        fail(("stableops: expected one rocm/include/hip/hip_runtime.h in {}, found {}; set the " +
              "toolchain's toolkit to @stableops_rocm//:toolkit (toolchains/rocm/BUILD.bazel), which " +
              "holds exactly one").format(ctx.attr.toolkit.label, len(roots)))
    common = (
        ctx.attr.copts +
        compilation_mode_copts(ctx) +
        ["--sysroot=" + cc_toolchain.sysroot, "--rocm-path=" + roots[0]] +
        REPRODUCIBLE_COPTS +
        ["--offload-arch=" + a for a in archs]
    )
    return [platform_common.ToolchainInfo(gpu = GpuToolchainInfo(
        backend = "rocm",
        compiler = ctx.file.clang,
        compiler_files = depset(ctx.files.toolkit, transitive = [cc_toolchain.all_files]),
        copts = ctx.attr.language_copts + common,
        host_only_copts = ctx.attr.host_only_language_copts + common,
        quote_include_flag = "-iquote",
        archs = archs,
        defines = ctx.attr.defines,
        runtime = ctx.attr.runtime[CcInfo],
        test_env = ctx.attr.runtime_env[RocmRuntimeEnvInfo].env,
        mnemonic = "HipCompile",
        source_flags = [],
    ))]

RocmRuntimeEnvInfo = provider(
    doc = "Environment a process that loads HIP objects needs.",
    fields = {"env": "dict str -> str (LD_LIBRARY_PATH, or nothing)"},
)

def _rocm_runtime_env_impl(ctx):
    env = {"LD_LIBRARY_PATH": ctx.attr.ld_library_path} if ctx.attr.ld_library_path else {}
    return [RocmRuntimeEnvInfo(env = env)]

rocm_runtime_env = rule(
    implementation = _rocm_runtime_env_impl,
    doc = "Where libamdhip64 is found at run time (made in @stableops_rocm): empty for the build image, whose system library path has it; <ROCM_PATH>/lib with --repo_env=ROCM_PATH.",
    attrs = {"ld_library_path": attr.string()},
    provides = [RocmRuntimeEnvInfo],
)

hip_toolchain = rule(
    implementation = _hip_toolchain_impl,
    doc = "The HIP clang as a //bazel:gpu_toolchain_type toolchain (see toolchains/rocm/BUILD.bazel).",
    attrs = dict(GPU_TOOLCHAIN_ATTRS, **{
        "clang": attr.label(allow_single_file = True, executable = True, cfg = "exec", mandatory = True, doc = "The HIP clang driver."),
        "archs": attr.label(default = "//bazel:rocm_archs", providers = [BuildSettingInfo], doc = "The --//bazel:rocm_archs setting."),
        "runtime_env": attr.label(providers = [RocmRuntimeEnvInfo], mandatory = True, doc = "A rocm_runtime_env target."),
    }),
    toolchains = use_cc_toolchain(),
    fragments = ["cpp"],
)
