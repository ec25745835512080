"""rocm: the HIP toolchain, as repository `@stableops_rocm`.

By default it comes from the pinned Debian packages of the build image
(tools/image/recipe.sh): the HIP clang of clang-21/llvm-21 (the compiler
Debian's hipcc 7.0.2 runs), HIP runtime headers and libamdhip64.so.6 from
libamdhip64-dev 6.4.3, and the AMDGPU device libraries of
rocm-device-libs-21 (inside clang 21's resource directory).

The repository is laid out like a minimal ROCm installation, so that the HIP
clang driver can be pointed at it with a relative `--rocm-path` and sees only
what is linked here (never /usr/include, which would leak the image's glibc
headers past the bullseye sysroot):

  rocm/include/hip, rocm/include/hsa   HIP and HSA headers
  rocm/include/thrust                  see below
  rocm/amdgcn/bitcode                  device libraries (ocml, ockl, oclc_*)
  rocm/share/hip/version               HIP version (the driver reads it to
                                       decide that the HIP >= 3.6 runtime
                                       wrapper header is used)
  rocm/lib/libamdhip64.so*             the HIP runtime, linked dynamically
  bin/clang, bin/clang-offload-bundler, bin/llvm-nm, bin/llvm-objcopy
                                       scripts that exec the tools by their
                                       absolute path (see below)

bin/*: not symbolic links. An action's input is a link's target file, so a
remote worker got a copy of the clang binary alone, outside its
installation: the driver then found neither lld (the AMDGPU device link,
"posix_spawn failed") nor its resource directory. The scripts run the
image's (or ROCM_PATH's) tools in place, as the C++ toolchain names clang 19
by absolute path: workers run the same image (docs/REMOTE_EXECUTION.md).

rocm/include/thrust: torch/headeronly/util/complex.h (pulled in by the stable
C shim) includes <thrust/complex.h> whenever __HIPCC__ is defined. The image
has no rocThrust (Debian's librocthrust-dev is not in the recipe), so unless
the ROCm installation has one, a declaration-only stand-in from
toolchains/rocm/thrust_stub is used: it declares thrust::complex and
thrust::polar without defining them, so the c10::complex conversions compile
and any real use of thrust::complex fails to compile instead of miscompiling.

Repository environment:
  ROCM_PATH   use this ROCm installation instead (e.g. /opt/rocm: include/hip,
              lib/libamdhip64.so, lib/llvm/bin/clang or llvm/bin/clang,
              amdgcn/bitcode); the build output says so.

Targets: bin/clang, :toolkit (every file the HIP compiler reads), :amdhip64
(the HIP runtime, linked dynamically), bin/clang-offload-bundler and
bin/llvm-nm, bin/llvm-objcopy (for the code-object test), :runtime_env (where tests find
libamdhip64: nothing for the image, whose system library path has
libamdhip64.so.6; <ROCM_PATH>/lib for ROCM_PATH). //toolchains/rocm:hip is
the toolchain made of them.
"""

_DEBIAN = struct(
    llvm_bin = "/usr/lib/llvm-21/bin",
    hip_include = "/usr/include",
    hip_lib = "/usr/lib/x86_64-linux-gnu",
    # Debian's rocm-device-libs-21 installs into clang 21's resource dir.
    device_libs = "/usr/lib/llvm-21/lib/clang/21/amdgcn/bitcode",
)

# What to do when the HIP toolchain is missing or broken.
_FIX = "Build through tools/bazel (whose image has Debian's HIP packages) or point --repo_env=ROCM_PATH at a complete ROCm installation."

def _first_existing(rctx, candidates, what):
    for c in candidates:
        if rctx.path(c).exists:
            return c
    fail(("stableops: expected {} at one of {}, found none; point --repo_env=ROCM_PATH at a " +
          "complete ROCm installation (e.g. /opt/rocm) or unset it to use the build image's HIP " +
          "packages").format(what, candidates))

def _hip_version(rctx, include):
    """(major, minor, patch) from hip/hip_version.h."""
    text = rctx.read(include + "/hip/hip_version.h")
    v = {}
    for line in text.splitlines():
        parts = [p for p in line.replace("\t", " ").split(" ") if p]
        if len(parts) == 3 and parts[0] == "#define" and parts[1] in ("HIP_VERSION_MAJOR", "HIP_VERSION_MINOR", "HIP_VERSION_PATCH"):
            v[parts[1]] = parts[2]
    if len(v) != 3:
        fail(("stableops: expected #define HIP_VERSION_MAJOR, _MINOR and _PATCH in " +
              "{}/hip/hip_version.h, found {}; the HIP headers there are incomplete. {}").format(
            include,
            sorted(v.keys()) or "none of them",
            _FIX,
        ))
    return v["HIP_VERSION_MAJOR"], v["HIP_VERSION_MINOR"], v["HIP_VERSION_PATCH"]

def _rocm_repository_impl(rctx):
    local = rctx.os.environ.get("ROCM_PATH", "")
    if local:
        if not rctx.path(local + "/include/hip/hip_runtime.h").exists:
            fail("stableops: ROCM_PATH={} but {}/include/hip/hip_runtime.h does not exist; point ROCM_PATH at a ROCm installation (e.g. /opt/rocm) or unset it to use the build image's HIP packages".format(local, local))

        # buildifier: disable=print  # says which toolkit/torch the build uses: meant for the user
        print("stableops: using the local ROCm installation at {} (--repo_env=ROCM_PATH), not the build image's pinned HIP packages".format(local))
        llvm_bin = _first_existing(rctx, [local + "/lib/llvm/bin", local + "/llvm/bin"], "ROCm's clang (lib/llvm/bin/clang)")
        hip_include = local + "/include"
        hip_lib = _first_existing(rctx, [local + "/lib", local + "/lib64"], "libamdhip64.so")
        device_libs = _first_existing(rctx, [
            local + "/amdgcn/bitcode",
            local + "/lib/llvm/lib/clang/amdgcn/bitcode",
        ], "the AMDGPU device libraries (amdgcn/bitcode/ocml.bc)")
        test_env = {"LD_LIBRARY_PATH": hip_lib}
    else:
        llvm_bin = _DEBIAN.llvm_bin
        hip_include = _DEBIAN.hip_include
        hip_lib = _DEBIAN.hip_lib
        device_libs = _DEBIAN.device_libs

        # libamdhip64.so.6 is on the image's default library path.
        test_env = {}

    for tool in ["clang", "clang-offload-bundler", "llvm-nm", "llvm-objcopy"]:
        if not rctx.path(llvm_bin + "/" + tool).exists:
            fail("stableops: expected {}/{} (the HIP clang toolchain), found nothing. {}".format(llvm_bin, tool, _FIX))
        rctx.file("bin/" + tool, "#!/bin/sh\nexec {}/{} \"$@\"\n".format(llvm_bin, tool), executable = True)
    if not rctx.path(device_libs + "/ocml.bc").exists:
        fail("stableops: expected the AMDGPU device libraries at {} (ocml.bc), found none. {}".format(device_libs, _FIX))
    if not rctx.path(hip_lib + "/libamdhip64.so").exists:
        fail("stableops: expected libamdhip64.so in {}, found none. {}".format(hip_lib, _FIX))

    rctx.symlink(hip_include + "/hip", "rocm/include/hip")
    if rctx.path(hip_include + "/hsa").exists:
        rctx.symlink(hip_include + "/hsa", "rocm/include/hsa")
    if rctx.path(hip_include + "/thrust/complex.h").exists and local:
        rctx.symlink(hip_include + "/thrust", "rocm/include/thrust")
        if rctx.path(hip_include + "/rocprim").exists:
            rctx.symlink(hip_include + "/rocprim", "rocm/include/rocprim")
        thrust = "rocThrust from " + hip_include
    else:
        rctx.symlink(rctx.path(rctx.attr._thrust_stub), "rocm/include/thrust/complex.h")
        thrust = "declaration-only stand-in (toolchains/rocm/thrust_stub)"
    rctx.symlink(device_libs, "rocm/amdgcn/bitcode")

    # Every libamdhip64.so* (the linker wants the unversioned name; the
    # NEEDED entry is the SONAME, libamdhip64.so.<major>).
    for f in rctx.path(hip_lib).readdir():
        if f.basename.startswith("libamdhip64.so"):
            rctx.symlink(f, "rocm/lib/" + f.basename)

    major, minor, patch = _hip_version(rctx, hip_include)
    rctx.file("rocm/share/hip/version", "HIP_VERSION_MAJOR={}\nHIP_VERSION_MINOR={}\nHIP_VERSION_PATCH={}\n".format(major, minor, patch))

    res = rctx.execute(["bin/clang", "--version"])
    if res.return_code != 0:
        fail("stableops: expected '{}/clang --version' to run (the HIP clang), but it failed: {}. {}".format(
            llvm_bin,
            res.stderr.strip(),
            _FIX,
        ))
    clang_version = res.stdout.strip().splitlines()[0]
    rctx.template("BUILD.bazel", rctx.attr._build_tpl, {
        "{clang_version}": clang_version,
        "{hip_version}": "{}.{}.{}".format(major, minor, patch),
        "{source}": local or "build image (Debian packages)",
        "{thrust}": thrust,
        "{toolchain_bzl}": str(Label("//toolchains/rocm:toolchain.bzl")),
        "{ld_library_path}": test_env.get("LD_LIBRARY_PATH", ""),
    })

rocm_repository = repository_rule(
    implementation = _rocm_repository_impl,
    attrs = {
        "_build_tpl": attr.label(default = "//toolchains/rocm:rocm.BUILD.tpl"),
        "_thrust_stub": attr.label(default = "//toolchains/rocm:thrust_stub/thrust/complex.h"),
    },
    environ = ["ROCM_PATH"],
    local = True,
    doc = "The HIP toolchain: the build image's Debian packages, or ROCM_PATH.",
)

def _rocm_extension_impl(_mctx):
    rocm_repository(name = "stableops_rocm")

rocm = module_extension(
    implementation = _rocm_extension_impl,
    doc = "Creates @stableops_rocm (see the module docstring).",
)
