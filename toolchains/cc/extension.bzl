"""cc: the hermetic C++ toolchain, as repository `@stableops_cc`.

The compiler is the build image's pinned clang 19; headers and libraries come
only from the bullseye sysroot the image carries (its absolute symbolic links
made relative at provisioning). The sysroot is linked into the repository so
every action names it by a relative path (same action keys on every machine).

Repository environment:
  STABLEOPS_SYSROOT   sysroot directory (default: /opt/stableops/sysroot)
  STABLEOPS_CLANG     clang driver      (default: /usr/lib/llvm-19/bin/clang)
"""

_DEFAULT_SYSROOT = "/opt/stableops/sysroot"
_DEFAULT_CLANG = "/usr/lib/llvm-19/bin/clang"

def _cc_repository_impl(rctx):
    sysroot = rctx.os.environ.get("STABLEOPS_SYSROOT", _DEFAULT_SYSROOT)
    clang = rctx.os.environ.get("STABLEOPS_CLANG", _DEFAULT_CLANG)
    if not rctx.path(sysroot + "/usr/include/stdio.h").exists:
        fail(("stableops: expected a glibc sysroot at '{}' (usr/include/stdio.h), found none. " +
              "Build through tools/bazel (whose image provides it) or set " +
              "--repo_env=STABLEOPS_SYSROOT to a Debian bullseye sysroot.").format(sysroot))
    if not rctx.path(clang).exists:
        fail(("stableops: expected the clang driver at '{}', found nothing. Build through " +
              "tools/bazel or set --repo_env=STABLEOPS_CLANG=/path/to/clang (clang 19).").format(clang))
    res = rctx.execute([clang, "-print-resource-dir"])
    if res.return_code != 0:
        fail(("stableops: expected '{} -print-resource-dir' to run (clang 19), but it failed: {}. " +
              "Build through tools/bazel or set --repo_env=STABLEOPS_CLANG to a working " +
              "clang 19").format(clang, res.stderr.strip()))
    resource_dir = res.stdout.strip()
    bindir = clang.rpartition("/")[0]
    rctx.symlink(sysroot, "sysroot")
    rctx.template("BUILD.bazel", rctx.attr._build_tpl, {
        "{sysroot}": "external/{}/sysroot".format(rctx.name),
        "{clang}": clang,
        "{bindir}": bindir,
        "{resource_dir}": resource_dir,
        "{config_bzl}": str(Label("//toolchains/cc:config.bzl")),
    })

cc_repository = repository_rule(
    implementation = _cc_repository_impl,
    attrs = {"_build_tpl": attr.label(default = "//toolchains/cc:cc.BUILD.tpl")},
    environ = ["STABLEOPS_SYSROOT", "STABLEOPS_CLANG"],
    local = True,
    doc = "Creates the hermetic clang + sysroot C++ toolchain repository.",
)

def _cc_extension_impl(_mctx):
    cc_repository(name = "stableops_cc")

cc = module_extension(
    implementation = _cc_extension_impl,
    doc = "Creates @stableops_cc; register its toolchain with register_toolchains(\"@stableops_cc//:all\").",
)
