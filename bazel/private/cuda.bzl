"""cuda_objects: compiles .cu sources with the hermetic nvcc into a CcInfo.

The rule feeds plain cc_library targets (stable_op_library puts it in deps):
nvcc's host compiler is the hermetic clang with the bullseye sysroot, so CUDA
objects keep the same glibc ceiling as the C++ ones. Architectures come from
--@stableops//bazel:cuda_archs.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "use_cpp_toolchain")
load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("//bazel/private:gpu_objects.bzl", "GPU_OBJECTS_ATTRS", "gpu_compile_context", "gpu_objects_providers")

def _gencode_flags(archs):
    """'sm_80,sm_90a,compute_120' -> nvcc -gencode flags (compute_X adds PTX)."""
    flags = []
    for arch in [a.strip() for a in archs.split(",") if a.strip()]:
        if arch.startswith("sm_"):
            num = arch[len("sm_"):]
            flags.append("-gencode=arch=compute_{},code=sm_{}".format(num, num))
        elif arch.startswith("compute_"):
            num = arch[len("compute_"):]
            flags.append("-gencode=arch=compute_{},code=compute_{}".format(num, num))
        else:
            fail("stableops: expected CUDA architectures like sm_90a or compute_120 in --//bazel:cuda_archs, found '{}'".format(arch))
    if not flags:
        fail("stableops: --//bazel:cuda_archs is empty; name at least one architecture (e.g. sm_90a)")
    return flags

def _cuda_objects_impl(ctx):
    cc = gpu_compile_context(ctx)
    cc_toolchain = cc.cc_toolchain
    compilation_context = cc.compilation_context
    archs = ctx.attr._archs[BuildSettingInfo].value
    host_flags = ["-fPIC", "--sysroot=" + cc_toolchain.sysroot, "-Wno-unused-command-line-argument"]

    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/{}/{}.pic.o".format(ctx.label.name, src.basename.rsplit(".", 1)[0]))
        args = ctx.actions.args()
        args.add("-ccbin", cc_toolchain.compiler_executable)
        args.add_all(["-x", "cu", "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xfatbin=-compress-all"])
        # Reproducible objects: by default nvcc names its intermediate files
        # tmpxft_<pid in hex>_..., and the host compiler bakes that name into
        # the object (the STT_FILE symbol and the static-initialiser function
        # _GLOBAL__sub_I_tmpxft_<pid>_..._<src>.cudafe1.cpp), so every build
        # of the same source gave a different .o and thus _C.abi3.so.
        # --objdir-as-tempdir (-objtemp) writes them next to the output
        # instead, named after it (<src>.pic.o.cudafe1.cpp): the name depends
        # only on the output's path, which is unique per action, so parallel
        # actions cannot collide either.
        args.add("--objdir-as-tempdir")
        args.add_joined("-Xcompiler", host_flags, join_with = ",")
        args.add_all(_gencode_flags(archs))
        args.add_all(compilation_context.defines, format_each = "-D%s")
        args.add_all(compilation_context.local_defines, format_each = "-D%s")
        args.add_all(compilation_context.includes, format_each = "-I%s")
        args.add_all(compilation_context.quote_includes, format_each = "-I%s")
        args.add_all(compilation_context.system_includes, before_each = "-isystem")
        args.add_all(ctx.attr.copts)
        args.add("-c", src)
        args.add("-o", obj)
        ctx.actions.run(
            executable = ctx.executable._nvcc,
            arguments = [args],
            inputs = depset(
                [src] + ctx.files.hdrs,
                transitive = [compilation_context.headers, ctx.attr._toolkit[DefaultInfo].files, cc_toolchain.all_files],
            ),
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "Compiling CUDA {} for {}".format(src.short_path, archs),
        )
        objects.append(obj)

    return gpu_objects_providers(ctx, cc, objects)

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    doc = "Compiles CUDA sources with the hermetic nvcc; use it through stable_op_library(gpu_srcs=...).",
    attrs = dict(GPU_OBJECTS_ATTRS, **{
        "_archs": attr.label(default = "//bazel:cuda_archs"),
        "_nvcc": attr.label(default = "@stableops_cuda//:cuda/bin/nvcc", executable = True, allow_single_file = True, cfg = "exec"),
        "_toolkit": attr.label(default = "@stableops_cuda//:toolkit"),
    }),
    fragments = ["cpp"],
    toolchains = use_cpp_toolchain(),
)
