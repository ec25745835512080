"""stableops' public Bazel API: build stable-ABI PyTorch op libraries.

    load("@stableops//bazel:defs.bzl", "stable_op_library", "stable_extension",
         "stable_py_test", "stable_abi_audit_test", "stable_wheel",
         "stable_target_version_test")

stableops' own //csrc, //python and //tests use exactly these.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library")
load("@rules_python//python:defs.bzl", "py_test")
load("@stableops_torch//:runtimes.bzl", "TORCH_RUNTIMES")
load("//bazel/private:compile_probe.bzl", "compile_probe_test")
load("//bazel/private:cuda.bzl", "cuda_objects")
load("//bazel/private:gpu_objects.bzl", "GPU_HDR_EXTENSIONS")
load("//bazel/private:hip.bzl", "hip_objects")
load("//bazel/private:wheel.bzl", _stable_wheel = "stable_wheel")
load("//toolchains/torch:version.bzl", "TORCH_TARGET_VERSION")

_STABLE_ABI = Label("@stableops_torch//:stable_abi")
_LIBTORCH_CPU = Label("@stableops_torch//:libtorch_cpu")
_GPU_DEFINES = Label("//bazel:gpu_defines")
_GPU_CUDA = Label("//bazel:gpu_cuda")
_GPU_ROCM = Label("//bazel:gpu_rocm")
_CUDART_STATIC = Label("@stableops_cuda//:cudart_static")
_AMDHIP64 = Label("@stableops_rocm//:amdhip64")
_ROCM_TEST_ENV = Label("@stableops_rocm//:test_env")
_ROCM_ARCHS_VARS = Label("//bazel:rocm_archs_vars")
_ABI_AUDIT = Label("//bazel/private:abi_audit.py")
_GLIBCXX_COMPAT = Label("//bazel/private:glibcxx_compat")

stable_wheel = _stable_wheel

def stable_op_library(name, srcs = [], hdrs = [], gpu_srcs = [], deps = [], copts = [], gpu_copts = [], **kwargs):
    """Op sources built against torch's stable ABI only, for CPU and GPU.

    A cc_library that sees torch's stable-ABI headers (torch/csrc/stable,
    torch/headeronly, the C shim) and nothing else of torch, with
    TORCH_TARGET_VERSION set from //toolchains/torch:version.bzl. Objects are
    always linked, so static op registrations survive into the extension.

    `gpu_srcs` (.cu files) are compiled only in GPU builds: by the hermetic
    nvcc under --config=cuda (architectures from --//bazel:cuda_archs), and
    the same files as HIP by the HIP clang under --config=rocm (architectures
    from --//bazel:rocm_archs), through csrc/gpu_compat.h. Every source sees
    STABLEOPS_WITH_GPU in GPU builds.

    Args:
      name: target name.
      srcs: .cpp sources (and private headers), built for every backend.
      hdrs: public headers.
      gpu_srcs: .cu sources, built only for a GPU backend.
      deps: other stable_op_library targets.
      copts: extra C++ compiler flags.
      gpu_copts: extra GPU compiler flags.
      **kwargs: passed to cc_library (visibility, tags, ...).
    """
    all_deps = deps + [_STABLE_ABI, _GPU_DEFINES]
    gpu = []
    if gpu_srcs:
        # Headers the GPU sources include by relative path.
        gpu_hdrs = hdrs + [s for s in srcs if s.endswith(tuple(GPU_HDR_EXTENSIONS))]
        cuda_objects(
            name = name + "_cuda",
            srcs = gpu_srcs,
            hdrs = gpu_hdrs,
            deps = all_deps + ([":" + name + "_hdrs"] if hdrs else []),
            copts = gpu_copts,
            target_compatible_with = select({
                _GPU_CUDA: [],
                "//conditions:default": [Label("@platforms//:incompatible")],
            }),
            visibility = ["//visibility:private"],
        )
        hip_objects(
            name = name + "_hip",
            srcs = gpu_srcs,
            hdrs = gpu_hdrs,
            deps = all_deps + ([":" + name + "_hdrs"] if hdrs else []),
            copts = gpu_copts,
            target_compatible_with = select({
                _GPU_ROCM: [],
                "//conditions:default": [Label("@platforms//:incompatible")],
            }),
            visibility = ["//visibility:private"],
        )
        if hdrs:
            cc_library(name = name + "_hdrs", hdrs = hdrs, deps = all_deps, visibility = ["//visibility:private"])
        gpu = select({
            _GPU_CUDA: [":" + name + "_cuda"],
            _GPU_ROCM: [":" + name + "_hip"],
            "//conditions:default": [],
        })
    cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        deps = all_deps + gpu,
        copts = copts,
        alwayslink = True,
        **kwargs
    )

def stable_extension(name, deps, **kwargs):
    """The ONE shared object of an op package: `<name>.abi3.so`.

    Links the given stable_op_library targets into a shared object whose only
    non-system dependency is libtorch_cpu.so (plus, in ROCm builds, the HIP
    runtime libamdhip64.so.<major>, linked dynamically as ROCm's torch does;
    the CUDA runtime is linked statically), named for abi3 so one file serves
    every Python >= 3.10 and every torch >= the target version. Links
    //bazel/private:glibcxx_compat, which keeps libstdc++ references within
    manylinux_2_28 (GLIBCXX <= 3.4.24) although torch's headers use GCC 9+
    stringstream constructors.

    Args:
      name: the shared object's path without `.abi3.so`, relative to the
        package (e.g. "stableops/_C" gives stableops/_C.abi3.so).
      deps: stable_op_library targets to link in.
      **kwargs: passed to cc_binary (visibility, tags, ...).
    """
    cc_binary(
        name = name + ".abi3.so",
        linkshared = True,
        deps = deps + [_LIBTORCH_CPU, _GLIBCXX_COMPAT] + select({
            _GPU_CUDA: [_CUDART_STATIC],
            _GPU_ROCM: [_AMDHIP64],
            "//conditions:default": [],
        }),
        **kwargs
    )

def stable_py_test(name, srcs, main = None, deps = [], data = [], env = {}, tags = [], toolchains = [], **kwargs):
    """A py_test run once under every torch runtime of @stableops_torch.

    The test sees STABLEOPS_EXPECT_BACKEND (cpu, cuda or rocm: what the
    library was built for), STABLEOPS_EXPECT_TORCH and STABLEOPS_PYTHON; in
    ROCm builds also STABLEOPS_ROCM_ARCHS (--//bazel:rocm_archs) and
    LD_LIBRARY_PATH (empty for the build image, whose system library path has
    libamdhip64; <ROCM_PATH>/lib with --repo_env=ROCM_PATH).
    Creates `<name>_torch<X_Y>` for each runtime (e.g. test_ops_torch2_11 and
    test_ops_torch2_13) plus a test_suite `<name>` holding them, so one built
    shared object is tested under each torch it promises to load into.

    Args:
      name: base name; also the test_suite's name.
      srcs: test sources.
      main: main source (default: `<name>.py`).
      deps: py_library deps.
      data: runtime data.
      env: extra environment for the test.
      tags: tags for every generated test (e.g. "requires-gpu-nvidia").
      toolchains: Make-variable providers for env (py_test's toolchains).
      **kwargs: passed to py_test.
    """
    tests = []
    for version in sorted(TORCH_RUNTIMES.keys()):
        test_name = "{}_torch{}".format(name, "_".join(version.split(".")[:2]))
        test_env = dict(env)
        test_env["STABLEOPS_PYTHON"] = TORCH_RUNTIMES[version]
        test_env["STABLEOPS_EXPECT_TORCH"] = version
        py_test(
            name = test_name,
            srcs = srcs,
            main = main or (name + ".py"),
            deps = deps,
            data = data,
            env = select({
                _GPU_CUDA: dict(test_env, STABLEOPS_EXPECT_BACKEND = "cuda"),
                _GPU_ROCM: dict(
                    test_env,
                    STABLEOPS_EXPECT_BACKEND = "rocm",
                    STABLEOPS_ROCM_ARCHS = "$(STABLEOPS_ROCM_ARCHS)",
                    LD_LIBRARY_PATH = "$(STABLEOPS_ROCM_LD_LIBRARY_PATH)",
                ),
                "//conditions:default": dict(test_env, STABLEOPS_EXPECT_BACKEND = "cpu"),
            }),
            toolchains = toolchains + select({
                _GPU_ROCM: [_ROCM_TEST_ENV, _ROCM_ARCHS_VARS],
                "//conditions:default": [],
            }),
            tags = tags,
            **kwargs
        )
        tests.append(":" + test_name)
    native.test_suite(name = name, tests = tests, tags = tags)

def stable_abi_audit_test(name, shared_object, max_glibc = "2.17", max_glibcxx = "3.4.24", **kwargs):
    """Audits a shared object against the stable-ABI promise.

    Fails when it has an undefined symbol outside the stable C shim
    (aoti_torch_*, torch_*) and the C/C++ runtime, a NEEDED entry other than
    libtorch_cpu.so and system libraries (and, in ROCm builds, the HIP runtime
    libamdhip64.so.N with its hip_x.y symbol versions), or a glibc / GLIBCXX
    symbol version above the bounds. Prints the highest versions it found.

    Args:
      name: test name.
      shared_object: label of the .so (e.g. a stable_extension target).
      max_glibc: highest GLIBC_x.y symbol version allowed.
      max_glibcxx: highest GLIBCXX_x.y.z symbol version allowed (default: the
        newest manylinux_2_28 allows, GCC 8's 3.4.24).
      **kwargs: passed to py_test.
    """
    py_test(
        name = name,
        srcs = [_ABI_AUDIT],
        main = _ABI_AUDIT,
        data = [shared_object],
        args = [
            "--so=$(rootpath {})".format(shared_object),
            "--max_glibc=" + max_glibc,
            "--max_glibcxx=" + max_glibcxx,
        ] + select({
            # stable_extension links the HIP runtime dynamically in ROCm builds.
            _GPU_ROCM: ["--allow_hip_runtime"],
            "//conditions:default": [],
        }),
        **kwargs
    )

def stable_target_version_test(name, src, newer_version, expected_error, target_version = TORCH_TARGET_VERSION, **kwargs):
    """Guards the torch target version: `src` uses an API newer than it.

    Compiles `src` (-fsyntax-only, the hermetic C++ toolchain, torch's
    stable-ABI headers) twice: with TORCH_TARGET_VERSION at `target_version`
    (default: //toolchains/torch:version.bzl's, the one the library is built
    at), which must FAIL with an error matching `expected_error`, and at
    `newer_version`, which must compile. Raising the target silently makes the
    first compile succeed and the test fail.

    Args:
      name: test name.
      src: a .cpp file using an API that appears in `newer_version`.
      newer_version: MAJOR.MINOR where `src` compiles (the build's torch
        headers must be at least this new).
      expected_error: grep -E pattern of the expected compile error.
      target_version: MAJOR.MINOR where `src` must not compile.
      **kwargs: passed to the test rule (tags, size, ...).
    """
    compile_probe_test(
        name = name,
        src = src,
        headers = _STABLE_ABI,
        fails_at = target_version,
        compiles_at = newer_version,
        expected_error = expected_error,
        **kwargs
    )
