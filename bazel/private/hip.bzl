"""hip_objects: compiles the .cu sources as HIP with the HIP clang into a CcInfo.

The ROCm counterpart of cuda_objects (cuda.bzl), for the SAME .cu files:
stable_op_library puts it in deps under --config=rocm. The sources are
compiled as HIP (`-x hip`); csrc/gpu_compat.h maps the CUDA runtime names
they use onto HIP's.

The HIP clang (@stableops_rocm) compiles host and device code in one driver
call. Host code sees the hermetic bullseye sysroot of @stableops_cc
(--sysroot), exactly like the C++ objects and nvcc's host compiler, so the
objects keep the same glibc/libstdc++ ceiling; HIP headers and device
libraries come only from @stableops_rocm's --rocm-path tree. Offload
architectures come from --@stableops//bazel:rocm_archs (never detected from
the build machine). Each object embeds a .hip_fatbin section holding one code
object per architecture.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "use_cpp_toolchain")
load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("//bazel/private:gpu_objects.bzl", "GPU_OBJECTS_ATTRS", "gpu_compile_context", "gpu_objects_providers")

def parse_rocm_archs(archs):
    """'gfx90a,gfx942' -> ['gfx90a', 'gfx942'], failing on anything else."""
    out = []
    for arch in [a.strip() for a in archs.split(",") if a.strip()]:
        # Feature suffixes such as gfx90a:xnack+ are allowed.
        if not arch.startswith("gfx") or arch == "native":
            fail("stableops: expected AMD GPU architectures like gfx942 in --//bazel:rocm_archs, found '{}'".format(arch))
        out.append(arch)
    if not out:
        fail("stableops: --//bazel:rocm_archs is empty; name at least one architecture (e.g. gfx942)")
    return out

def _hip_objects_impl(ctx):
    cc = gpu_compile_context(ctx)
    cc_toolchain = cc.cc_toolchain
    compilation_context = cc.compilation_context
    archs = parse_rocm_archs(ctx.attr._archs[BuildSettingInfo].value)

    # The --rocm-path tree: the directory holding include/hip/hip_runtime.h,
    # relative to the execution root like the sysroot.
    rocm_path = None
    for f in ctx.files._toolkit:
        if f.path.endswith("/rocm/include/hip/hip_runtime.h"):
            rocm_path = f.path[:-len("/include/hip/hip_runtime.h")]
    if not rocm_path:
        fail("stableops: @stableops_rocm//:toolkit has no rocm/include/hip/hip_runtime.h")

    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_hip_objs/{}/{}.pic.o".format(ctx.label.name, src.basename.rsplit(".", 1)[0]))
        args = ctx.actions.args()
        args.add_all(["-x", "hip", "-std=c++17", "-O3", "-DNDEBUG", "-fPIC"])
        args.add("--sysroot=" + cc_toolchain.sysroot)
        args.add("--rocm-path=" + rocm_path)
        args.add_all(archs, format_each = "--offload-arch=%s")

        # Code object v5: loadable by every ROCm 6.x and 7.x runtime (clang
        # 21 defaults to v6, which older runtimes reject).
        args.add("-mcode-object-version=5")
        # No -no-canonical-prefixes: the driver must resolve bin/clang to the
        # real installation to find its resource directory and lld.
        args.add_all([
            "-ffunction-sections",
            "-fdata-sections",
            "-fno-omit-frame-pointer",
            # Reproducible objects, as in the C++ toolchain.
            "-Wno-builtin-macro-redefined",
            "-D__DATE__=\"redacted\"",
            "-D__TIMESTAMP__=\"redacted\"",
            "-D__TIME__=\"redacted\"",
        ])
        args.add_all(compilation_context.defines, format_each = "-D%s")
        args.add_all(compilation_context.local_defines, format_each = "-D%s")
        args.add_all(compilation_context.includes, format_each = "-I%s")
        args.add_all(compilation_context.quote_includes, format_each = "-iquote%s")
        args.add_all(compilation_context.system_includes, before_each = "-isystem")
        args.add_all(ctx.attr.copts)
        args.add("-c", src)
        args.add("-o", obj)
        ctx.actions.run(
            executable = ctx.executable._clang,
            arguments = [args],
            inputs = depset(
                [src] + ctx.files.hdrs,
                transitive = [compilation_context.headers, depset(ctx.files._toolkit), cc_toolchain.all_files],
            ),
            outputs = [obj],
            mnemonic = "HipCompile",
            progress_message = "Compiling HIP {} for {}".format(src.short_path, ",".join(archs)),
        )
        objects.append(obj)

    return gpu_objects_providers(ctx, cc, objects)

hip_objects = rule(
    implementation = _hip_objects_impl,
    doc = "Compiles .cu sources as HIP with the HIP clang; use it through stable_op_library(gpu_srcs=...).",
    attrs = dict(GPU_OBJECTS_ATTRS, **{
        "_archs": attr.label(default = "//bazel:rocm_archs"),
        "_clang": attr.label(default = "@stableops_rocm//:bin/clang", executable = True, allow_single_file = True, cfg = "exec"),
        "_toolkit": attr.label(default = "@stableops_rocm//:toolkit"),
    }),
    fragments = ["cpp"],
    toolchains = use_cpp_toolchain(),
)

def _rocm_archs_vars_impl(ctx):
    archs = parse_rocm_archs(ctx.attr._archs[BuildSettingInfo].value)
    return [platform_common.TemplateVariableInfo({"STABLEOPS_ROCM_ARCHS": ",".join(archs)})]

rocm_archs_vars = rule(
    implementation = _rocm_archs_vars_impl,
    doc = "Make variable $(STABLEOPS_ROCM_ARCHS): the configured --//bazel:rocm_archs (put it in a test's toolchains).",
    attrs = {"_archs": attr.label(default = "//bazel:rocm_archs")},
)

def _rocm_test_env_impl(ctx):
    return [platform_common.TemplateVariableInfo({
        "STABLEOPS_ROCM_LD_LIBRARY_PATH": ctx.attr.ld_library_path,
    })]

rocm_test_env = rule(
    implementation = _rocm_test_env_impl,
    doc = "Make variable $(STABLEOPS_ROCM_LD_LIBRARY_PATH) (created in @stableops_rocm): where tests find libamdhip64; empty for the build image, whose system library path has it.",
    attrs = {"ld_library_path": attr.string()},
)
