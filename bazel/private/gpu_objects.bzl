"""gpu_objects and gpu_backend: the GPU side of stable_op_library.

Both ask toolchain resolution for the GPU toolchain (//bazel:gpu_toolchain_type;
toolchains/cuda under --config=cuda, toolchains/rocm under --config=rocm, none
under --config=cpu) instead of selecting on the backend themselves.
"""

load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain", "use_cc_toolchain")
load("@rules_cc//cc/common:cc_common.bzl", "cc_common")
load("@rules_cc//cc/common:cc_info.bzl", "CcInfo")

GPU_TOOLCHAIN_TYPE = Label("//bazel:gpu_toolchain_type")

GPU_SRC_EXTENSIONS = [".cu"]
GPU_HDR_EXTENSIONS = [".h", ".hpp", ".cuh", ".inc"]

def _gpu_toolchain(ctx):
    """The resolved GpuToolchainInfo, or None when the build has no GPU backend."""
    toolchain = ctx.toolchains[GPU_TOOLCHAIN_TYPE]
    return toolchain.gpu if toolchain else None

def _gpu_objects_impl(ctx):
    gpu = _gpu_toolchain(ctx)
    if not gpu:
        # --config=cpu: no GPU compiler, nothing to compile or link.
        return [DefaultInfo(), CcInfo()]
    deps = [d[CcInfo] for d in ctx.attr.deps]
    compilation_context = cc_common.merge_cc_infos(cc_infos = deps).compilation_context
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_gpu_objs/{}/{}.pic.o".format(ctx.label.name, src.basename.rsplit(".", 1)[0]))
        args = ctx.actions.args()
        args.add_all(gpu.host_only_copts if ctx.attr.host_only else gpu.copts)
        if ctx.attr.host_only:
            # csrc/gpu_compat.h then makes any __global__ after it an error.
            args.add("-DSTABLEOPS_GPU_HOST_ONLY")
        args.add_all(compilation_context.defines, format_each = "-D%s")
        args.add_all(compilation_context.local_defines, format_each = "-D%s")
        args.add_all(compilation_context.includes, before_each = "-I")
        args.add_all(compilation_context.quote_includes, before_each = gpu.quote_include_flag)
        args.add_all(compilation_context.system_includes, before_each = "-isystem")
        args.add_all(ctx.attr.copts)
        args.add_all([f.replace("{src}", src.path) for f in gpu.source_flags])
        args.add("-c", src)
        args.add("-o", obj)
        ctx.actions.run(
            executable = gpu.compiler,
            arguments = [args],
            inputs = depset([src] + ctx.files.hdrs, transitive = [compilation_context.headers, gpu.compiler_files]),
            outputs = [obj],
            mnemonic = gpu.mnemonic,
            toolchain = GPU_TOOLCHAIN_TYPE,
            progress_message = (
                "Compiling {} host code {}".format(gpu.backend.upper(), src.short_path) if ctx.attr.host_only else "Compiling {} {} for {}".format(gpu.backend.upper(), src.short_path, ",".join(gpu.archs))
            ),
        )
        objects.append(obj)

    cc_toolchain = find_cc_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        name = ctx.label.name,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = cc_common.create_compilation_outputs(
            objects = depset(objects),
            pic_objects = depset(objects),
        ),
        # The GPU runtime comes with the objects that need it.
        linking_contexts = [d.linking_context for d in deps] + [gpu.runtime.linking_context],
        alwayslink = True,
    )
    return [
        DefaultInfo(files = depset(objects)),
        CcInfo(linking_context = linking_context),
    ]

gpu_objects = rule(
    implementation = _gpu_objects_impl,
    doc = """Compiles .cu sources with the resolved GPU toolchain into always-linked
objects (plus the GPU runtime), as a CcInfo for a cc_library's deps: nvcc under
--config=cuda, the HIP clang (the same sources as HIP) under --config=rocm,
nothing under --config=cpu. With host_only, the host code only (sources with
no kernels). Use it through stable_op_library(gpu_srcs=..., gpu_host_srcs=...).""",
    attrs = {
        "srcs": attr.label_list(allow_files = GPU_SRC_EXTENSIONS, doc = ".cu sources."),
        "hdrs": attr.label_list(allow_files = GPU_HDR_EXTENSIONS, doc = "Headers the sources include by relative path (the library's own)."),
        "deps": attr.label_list(providers = [CcInfo], doc = "Headers, defines and libraries the sources use."),
        "copts": attr.string_list(doc = "Extra GPU compiler flags."),
        "host_only": attr.bool(doc = "The sources have no device code: compile them for the host only (the toolchain's host_only_copts), with no device pass."),
    },
    fragments = ["cpp"],
    toolchains = use_cc_toolchain() + [config_common.toolchain_type(GPU_TOOLCHAIN_TYPE, mandatory = False)],
)

def _gpu_backend_impl(ctx):
    gpu = _gpu_toolchain(ctx)
    defines = gpu.defines if gpu else []
    test_env = gpu.test_env if gpu else {}
    return [
        CcInfo(compilation_context = cc_common.create_compilation_context(defines = depset(defines))),
        platform_common.TemplateVariableInfo({
            "STABLEOPS_GPU_BACKEND": gpu.backend if gpu else "cpu",
            "STABLEOPS_GPU_ARCHS": ",".join(gpu.archs) if gpu else "",
            "STABLEOPS_GPU_LD_LIBRARY_PATH": test_env.get("LD_LIBRARY_PATH", ""),
        }),
    ]

gpu_backend = rule(
    implementation = _gpu_backend_impl,
    doc = """The build's GPU backend, from the resolved GPU toolchain (none: cpu).

As a dependency (CcInfo): the toolchain's preprocessor symbols for every op
source (STABLEOPS_WITH_GPU and USE_CUDA or USE_ROCM; none for cpu). In a
rule's `toolchains`: the Make variables $(STABLEOPS_GPU_BACKEND) (cpu, cuda or
rocm), $(STABLEOPS_GPU_ARCHS) (comma-separated) and
$(STABLEOPS_GPU_LD_LIBRARY_PATH) (where the GPU runtime is found; empty when
the system path has it).""",
    toolchains = [config_common.toolchain_type(GPU_TOOLCHAIN_TYPE, mandatory = False)],
)
