"""cc_toolchain_config for the hermetic clang + bullseye sysroot toolchain.

Every compile and link sees only the sysroot's glibc 2.31 / libstdc++ 10
headers and libraries (never the image's), so shared objects need no glibc
symbol newer than 2.17 and, with //bazel/private:glibcxx_compat, no GLIBCXX
newer than 3.4.21 (the ABI audit, bazel/private/abi_audit.py, checks both
against its bounds 2.17 and 3.4.24). Outputs are reproducible: no build paths,
dates or build ids leak into objects (//toolchains:reproducible.bzl).

Compilation modes (-c): opt (the default) -O3 -DNDEBUG with function and data
sections, linked with --gc-sections and stripped of debug information; dbg
(--config=dbg) -O0 -g; fastbuild -O1.
"""

load("@rules_cc//cc:action_names.bzl", "ACTION_NAMES")
load(
    "@rules_cc//cc:cc_toolchain_config_lib.bzl",
    "feature",
    "flag_group",
    "flag_set",
    "tool_path",
    "with_feature_set",
)
load("@rules_cc//cc/common:cc_common.bzl", "cc_common")
load("@rules_cc//cc/toolchains:cc_toolchain_config_info.bzl", "CcToolchainConfigInfo")
load("//toolchains:reproducible.bzl", "REPRODUCIBLE_COPTS", "REPRODUCIBLE_LINKOPTS")

_COMPILE_ACTIONS = [
    ACTION_NAMES.c_compile,
    ACTION_NAMES.cpp_compile,
    ACTION_NAMES.assemble,
    ACTION_NAMES.preprocess_assemble,
]
_CXX_ACTIONS = [ACTION_NAMES.cpp_compile]
_LINK_ACTIONS = [
    ACTION_NAMES.cpp_link_executable,
    ACTION_NAMES.cpp_link_dynamic_library,
    ACTION_NAMES.cpp_link_nodeps_dynamic_library,
]

def _flags(actions, flags, features = None, not_features = None):
    return flag_set(
        actions = actions,
        flag_groups = [flag_group(flags = flags)],
        with_features = [with_feature_set(
            features = features or [],
            not_features = not_features or [],
        )] if (features or not_features) else [],
    )

def _impl(ctx):
    sysroot = ctx.attr.sysroot
    features = [
        feature(name = "supports_pic", enabled = True),
        feature(name = "supports_dynamic_linker", enabled = True),
        feature(name = "opt"),
        feature(name = "dbg"),
        feature(name = "fastbuild"),
        # Defined empty on purpose: Bazel's legacy version adds RUNPATHs into
        # its _solib tree, which a shipped shared object must not carry
        # (libtorch_cpu.so is found because torch has already loaded it).
        feature(name = "runtime_library_search_directories", enabled = True),
        feature(
            name = "hermetic_compile_flags",
            enabled = True,
            flag_sets = [
                _flags(_COMPILE_ACTIONS, [
                    "--sysroot=" + sysroot,
                    "-no-canonical-prefixes",
                    "-Wall",
                    "-Wextra",
                    "-Wno-unused-parameter",
                    "-fPIC",
                    "-fstack-protector-strong",
                    "-fno-omit-frame-pointer",
                ] + REPRODUCIBLE_COPTS),
                _flags(_CXX_ACTIONS, ["-std=c++17"]),
                _flags(_COMPILE_ACTIONS, ["-O3", "-DNDEBUG", "-ffunction-sections", "-fdata-sections"], features = ["opt"]),
                _flags(_COMPILE_ACTIONS, ["-O0", "-g"], features = ["dbg"]),
                _flags(_COMPILE_ACTIONS, ["-O1"], features = ["fastbuild"]),
            ],
        ),
        feature(
            name = "hermetic_link_flags",
            enabled = True,
            flag_sets = [
                _flags(_LINK_ACTIONS, [
                    "--sysroot=" + sysroot,
                    "-no-canonical-prefixes",
                    "-fuse-ld=lld",
                    "-Wl,-z,relro,-z,now",
                    "-Wl,-z,noexecstack",
                    "-Wl,--hash-style=gnu",
                    "-Wl,--as-needed",
                    "-lstdc++",
                    "-lm",
                ] + REPRODUCIBLE_LINKOPTS),
                _flags(_LINK_ACTIONS, ["-Wl,--gc-sections", "-Wl,-O1", "-Wl,--strip-debug"], features = ["opt"]),
            ],
        ),
    ]

    return cc_common.create_cc_toolchain_config_info(
        ctx = ctx,
        features = features,
        cxx_builtin_include_directories = ctx.attr.builtin_include_directories,
        toolchain_identifier = "stableops-clang-bullseye",
        host_system_name = "x86_64-unknown-linux-gnu",
        target_system_name = "x86_64-unknown-linux-gnu",
        target_cpu = "k8",
        target_libc = "glibc_2.31",
        compiler = "clang",
        abi_version = "local",
        abi_libc_version = "glibc_2.31",
        tool_paths = [tool_path(name = name, path = path) for name, path in ctx.attr.tool_paths.items()],
        builtin_sysroot = sysroot,
    )

cc_toolchain_config = rule(
    implementation = _impl,
    attrs = {
        "builtin_include_directories": attr.string_list(mandatory = True, doc = "Directories clang searches by itself (sysroot and resource headers): exempt from the inclusion check."),
        "sysroot": attr.string(mandatory = True, doc = "Sysroot path relative to the execution root."),
        "tool_paths": attr.string_dict(mandatory = True, doc = "Tool name (gcc, ld, ar, ...) to its path, as cc_common.create_cc_toolchain_config_info takes them."),
    },
    provides = [CcToolchainConfigInfo],
    doc = "The hermetic clang toolchain's configuration (see the module docstring).",
)
