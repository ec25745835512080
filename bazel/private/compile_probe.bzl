"""compile_probe_test: a source must fail to compile at one torch target version
and compile at another, with the hermetic C++ toolchain and torch's stable-ABI
headers (guards TORCH_TARGET_VERSION against drifting)."""

load("@rules_cc//cc:action_names.bzl", "ACTION_NAMES")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain", "use_cc_toolchain")
load("@rules_cc//cc/common:cc_common.bzl", "cc_common")
load("@rules_cc//cc/common:cc_info.bzl", "CcInfo")
load("//toolchains/torch:version.bzl", "target_version_hex")

def _compile(ctx, cc_toolchain, feature_configuration, compilation_context, version, name):
    """Compiles ctx.file.src at `version` (-fsyntax-only); records exit code and log."""
    hex_version = target_version_hex(version)
    variables = cc_common.create_compile_variables(
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + ["-std=c++17"],
        source_file = ctx.file.src.path,
        include_directories = compilation_context.includes,
        quote_include_directories = compilation_context.quote_includes,
        system_include_directories = compilation_context.system_includes,
        framework_include_directories = compilation_context.framework_includes,
        # Not the library's own TORCH_TARGET_VERSION define: the version under test.
        preprocessor_defines = depset(["TORCH_TARGET_VERSION=" + hex_version]),
    )
    compiler = cc_common.get_tool_for_action(feature_configuration = feature_configuration, action_name = ACTION_NAMES.cpp_compile)
    flags = cc_common.get_memory_inefficient_command_line(
        feature_configuration = feature_configuration,
        action_name = ACTION_NAMES.cpp_compile,
        variables = variables,
    )
    env = cc_common.get_environment_variables(
        feature_configuration = feature_configuration,
        action_name = ACTION_NAMES.cpp_compile,
        variables = variables,
    )
    result = ctx.actions.declare_file("{}.{}.result".format(ctx.label.name, name))
    args = ctx.actions.args()
    args.add(result)
    args.add(compiler)
    args.add_all(flags)
    args.add("-fsyntax-only")
    ctx.actions.run_shell(
        # The compile may fail: that is a result, recorded, not an error.
        command = 'out="$1"; shift; { echo "TORCH_TARGET_VERSION=' + hex_version + ' ($ $*)"; "$@" 2>&1; echo "exit=$?"; } > "$out"',
        arguments = [args],
        inputs = depset([ctx.file.src], transitive = [cc_toolchain.all_files, compilation_context.headers]),
        outputs = [result],
        env = env,
        mnemonic = "CompileProbe",
        progress_message = "Compiling %{label} at torch " + version,
    )
    return result

def _compile_probe_test_impl(ctx):
    cc_toolchain = find_cc_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    compilation_context = ctx.attr.headers[CcInfo].compilation_context
    fails = _compile(ctx, cc_toolchain, feature_configuration, compilation_context, ctx.attr.fails_at, "fails_at")
    compiles = _compile(ctx, cc_toolchain, feature_configuration, compilation_context, ctx.attr.compiles_at, "compiles_at")
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.expand_template(
        template = ctx.file._template,
        output = script,
        is_executable = True,
        substitutions = {
            "@FAILS_AT@": ctx.attr.fails_at,
            "@FAILS_LOG@": fails.short_path,
            "@COMPILES_AT@": ctx.attr.compiles_at,
            "@COMPILES_LOG@": compiles.short_path,
            "@EXPECTED_ERROR@": "'" + ctx.attr.expected_error.replace("'", "'\\''") + "'",
        },
    )
    return [DefaultInfo(executable = script, runfiles = ctx.runfiles(files = [fails, compiles]))]

compile_probe_test = rule(
    implementation = _compile_probe_test_impl,
    test = True,
    doc = """Asserts that `src` fails to compile with TORCH_TARGET_VERSION set to
`fails_at` (with an error matching `expected_error`) and compiles with it set
to `compiles_at`. Both compiles use the configured C++ toolchain's compiler,
flags and sysroot, and the include paths of `headers`; hex values come from
//toolchains/torch:version.bzl's target_version_hex.""",
    attrs = {
        "src": attr.label(allow_single_file = [".cc", ".cpp"], mandatory = True, doc = "The C++ source compiled at both versions."),
        "headers": attr.label(providers = [CcInfo], mandatory = True, doc = "e.g. @stableops_torch//:stable_abi"),
        "fails_at": attr.string(mandatory = True, doc = "MAJOR.MINOR where the compile must fail."),
        "compiles_at": attr.string(mandatory = True, doc = "MAJOR.MINOR where the compile must succeed."),
        "expected_error": attr.string(mandatory = True, doc = "grep -E pattern the failing compile's output must match."),
        "_template": attr.label(default = "//bazel/private:compile_probe_test.sh.tpl", allow_single_file = True),
    },
    fragments = ["cpp"],
    toolchains = use_cc_toolchain(),
)
