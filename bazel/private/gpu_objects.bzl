"""What cuda_objects and hip_objects share: attributes, setup and the CcInfo.

Both compile .cu files into PIC objects with a GPU compiler and hand them to
cc_library as an always-linked CcInfo (stable_op_library puts the right one
in deps); only the compiler and its flags differ.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

GPU_SRC_EXTENSIONS = [".cu"]
GPU_HDR_EXTENSIONS = [".h", ".hpp", ".cuh", ".inc"]

# Attributes common to both rules.
GPU_OBJECTS_ATTRS = {
    "srcs": attr.label_list(allow_files = GPU_SRC_EXTENSIONS, doc = ".cu sources."),
    "hdrs": attr.label_list(allow_files = GPU_HDR_EXTENSIONS, doc = "Headers the sources include by relative path (the library's own)."),
    "deps": attr.label_list(providers = [CcInfo], doc = "Headers, defines and libraries the sources use."),
    "copts": attr.string_list(doc = "Extra GPU compiler flags."),
    "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
}

def gpu_compile_context(ctx):
    """Returns a struct: cc_toolchain, feature_configuration, deps (CcInfo list), compilation_context."""
    cc_toolchain = find_cpp_toolchain(ctx)
    deps = [d[CcInfo] for d in ctx.attr.deps]
    return struct(
        cc_toolchain = cc_toolchain,
        feature_configuration = cc_common.configure_features(
            ctx = ctx,
            cc_toolchain = cc_toolchain,
            requested_features = ctx.features,
            unsupported_features = ctx.disabled_features,
        ),
        deps = deps,
        compilation_context = cc_common.merge_cc_infos(cc_infos = deps).compilation_context,
    )

def gpu_objects_providers(ctx, cc, objects):
    """DefaultInfo and an always-linked CcInfo for the compiled `objects`."""
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        name = ctx.label.name,
        feature_configuration = cc.feature_configuration,
        cc_toolchain = cc.cc_toolchain,
        compilation_outputs = cc_common.create_compilation_outputs(
            objects = depset(objects),
            pic_objects = depset(objects),
        ),
        linking_contexts = [d.linking_context for d in cc.deps],
        alwayslink = True,
    )
    return [
        DefaultInfo(files = depset(objects)),
        CcInfo(compilation_context = cc.compilation_context, linking_context = linking_context),
    ]
