"""stableops' public Bazel API: build stable-ABI PyTorch op libraries.

    load("@stableops//bazel:defs.bzl", "stable_op_library", "stable_shared_object",
         "stable_py_test", "stable_abi_audit_test", "stable_target_version_test",
         "stable_wheel", "backend_select", "TORCH_TARGET_VERSION")

stableops' own //csrc, //python and //tests use exactly these. The GPU
backend (--config=cuda, rocm or cpu) reaches them through toolchain
resolution (//bazel:gpu_toolchain_type); none of them selects on it.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library")
load("@rules_python//python:defs.bzl", "py_test")
load("@stableops_torch//:config.bzl", "SHIM_SYMBOL_FILES", "SKIPPED_TORCH_RUNTIMES", "TORCH_RUNTIMES", _CONFIGURED_TARGET = "TORCH_TARGET_VERSION")
load("//bazel/private:compile_probe.bzl", "compile_probe_test")
load("//bazel/private:gpu_objects.bzl", "GPU_HDR_EXTENSIONS", "gpu_objects")
load("//bazel/private:wheel.bzl", "stable_wheel_rule", "with_torch_requirement")

# The torch target version of this build (MAJOR.MINOR): the root module's
# torch.configure(target_version = ...), else the default of
# //toolchains/torch:version.bzl. The oldest torch the binaries load into.
TORCH_TARGET_VERSION = _CONFIGURED_TARGET

_STABLE_ABI = Label("@stableops_torch//:stable_abi")
_LIBTORCH_CPU = Label("@stableops_torch//:libtorch_cpu")
_GPU_BACKEND = Label("//bazel:gpu_backend")
_GPU_CUDA = Label("//bazel:gpu_cuda")
_GPU_ROCM = Label("//bazel:gpu_rocm")
_OLDER_THAN_TARGET = Label("//bazel:torch_runtime_older_than_target")
_ABI_AUDIT = Label("//bazel/private:abi_audit.py")
_GLIBCXX_COMPAT = Label("//bazel/private:glibcxx_compat")

def backend_select(cuda, rocm, cpu):
    """A select() over the build's GPU backend.

    Args:
      cuda: the value under --config=cuda (--//bazel:gpu=cuda).
      rocm: the value under --config=rocm (--//bazel:gpu=rocm).
      cpu: the value under --config=cpu (--//bazel:gpu=none).

    Returns:
      A select() usable in any configurable attribute.
    """
    return select({
        _GPU_CUDA: cuda,
        _GPU_ROCM: rocm,
        "//conditions:default": cpu,
    })

def stable_op_library(name, srcs = [], hdrs = [], gpu_srcs = [], gpu_host_srcs = [], deps = [], copts = [], gpu_copts = [], **kwargs):
    """Op sources built against torch's stable ABI only, for CPU and GPU.

    A cc_library that sees torch's stable-ABI headers (torch/csrc/stable,
    torch/headeronly, the C shim) and nothing else of torch, with
    TORCH_TARGET_VERSION set to the configured target. Objects are always
    linked, so static op registrations survive into the shared object.

    `gpu_srcs` (.cu files) are compiled by the resolved GPU toolchain: nvcc
    under --config=cuda (architectures from --//bazel:cuda_archs), the same
    files as HIP by the HIP clang under --config=rocm (--//bazel:rocm_archs;
    stableops/gpu_compat.h maps the runtime names), nothing under
    --config=cpu. `gpu_host_srcs` likewise, but for the host only (GPU
    runtime calls without kernels). In GPU builds every source sees
    STABLEOPS_WITH_GPU and USE_CUDA or USE_ROCM.

    Args:
      name: target name.
      srcs: .cpp sources (and private headers), built for every backend.
      hdrs: public headers.
      gpu_srcs: .cu sources, built only for a GPU backend.
      gpu_host_srcs: .cu sources that call the GPU runtime (through
        gpu_compat.h) but define no kernel: built only for a GPU backend,
        by the same toolchain with the same runtime headers and defines,
        for the host only (no device pass per architecture, no fat
        binary), so several times cheaper to compile than gpu_srcs. They
        see STABLEOPS_GPU_HOST_ONLY, which makes any __global__ after
        stableops/gpu_compat.h a compile error on both backends (without
        that header nvcc still rejects a kernel, but HIP would build it
        with no device code); keep kernels in gpu_srcs.
      deps: other stable_op_library targets.
      copts: extra C++ compiler flags.
      gpu_copts: extra GPU compiler flags.
      **kwargs: passed to cc_library (visibility, tags, ...).
    """
    all_deps = deps + [_STABLE_ABI, _GPU_BACKEND]
    gpu = []
    if (gpu_srcs or gpu_host_srcs) and hdrs:
        cc_library(
            name = name + "_hdrs",
            hdrs = hdrs,
            deps = all_deps,
            visibility = ["//visibility:private"],
        )
    for suffix, sources, host_only in [("_gpu", gpu_srcs, False), ("_gpu_host", gpu_host_srcs, True)]:
        if not sources:
            continue
        gpu_objects(
            name = name + suffix,
            srcs = sources,
            # Headers the GPU sources include by relative path.
            hdrs = hdrs + [s for s in srcs if s.endswith(tuple(GPU_HDR_EXTENSIONS))],
            deps = all_deps + ([":" + name + "_hdrs"] if hdrs else []),
            copts = gpu_copts,
            host_only = host_only,
            tags = kwargs.get("tags"),
            testonly = kwargs.get("testonly"),
            visibility = ["//visibility:private"],
        )
        gpu.append(":" + name + suffix)
    cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        deps = all_deps + gpu,
        copts = copts,
        alwayslink = True,
        **kwargs
    )

def stable_shared_object(name, deps, **kwargs):
    """The ONE shared object of an op package: `<name>.abi3.so`.

    Links the given stable_op_library targets into a shared object whose only
    non-system dependency is libtorch_cpu.so (plus, in ROCm builds, the HIP
    runtime libamdhip64.so.<major>, linked dynamically as ROCm's torch does;
    the CUDA runtime is linked statically; both come with the GPU objects
    that need them), named for abi3 so one file serves every Python >= 3.10
    and every torch >= the target version. Links
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
        deps = deps + [_LIBTORCH_CPU, _GLIBCXX_COMPAT],
        **kwargs
    )

def stable_extension(name, deps, **kwargs):
    """Deprecated alias of stable_shared_object, kept for 0.2.x; removed in 0.3.0.

    The old name read like a Bazel module extension; it builds the same
    shared object.

    Args:
      name: as for stable_shared_object.
      deps: as for stable_shared_object.
      **kwargs: as for stable_shared_object.
    """
    stable_shared_object(name = name, deps = deps, **kwargs)

def stable_py_test(name, srcs, main = None, deps = [], data = [], env = {}, tags = [], toolchains = [], **kwargs):
    """A py_test run once under every torch runtime of the build.

    Creates `<name>_torch<X_Y>` for each runtime of @stableops_torch (e.g.
    test_ops_torch2_11 and test_ops_torch2_13) plus a test_suite `<name>`
    holding them, so one built shared object is tested under each torch it
    promises to load into. A runtime older than the target version gets its
    test too, incompatible with every platform through the constraint
    //bazel:torch_runtime_older_than_target, so `bazel test` reports it
    SKIPPED (and names that constraint if asked to run it).

    A test tagged `requires-gpu-*` (it tests the GPU of the machine it runs
    on) is also tagged `no-remote`: it always runs on the machine that runs
    Bazel, never on a remote-execution worker, and its result is never shared
    through a remote cache (whether a GPU was present is not part of the
    action's cache key). docs/REMOTE_EXECUTION.md says how GPU workers would
    take them instead.

    The test sees STABLEOPS_EXPECT_BACKEND (cpu, cuda or rocm: what the
    library was built for), STABLEOPS_GPU_ARCHS (the configured
    architectures), STABLEOPS_EXPECT_TORCH, STABLEOPS_PYTHON, and
    LD_LIBRARY_PATH where the GPU runtime needs it (ROCm with ROCM_PATH).

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
    if [t for t in tags if t.startswith("requires-gpu")] and "no-remote" not in tags:
        tags = tags + ["no-remote"]
    runtimes = dict(TORCH_RUNTIMES)
    for version in SKIPPED_TORCH_RUNTIMES:
        runtimes[version] = None
    compatible = kwargs.pop("target_compatible_with", [])
    tests = []
    for version in sorted(runtimes.keys()):
        test_name = "{}_torch{}".format(name, "_".join(version.split(".")[:2]))
        test_env = dict(env)
        test_env.update({
            "STABLEOPS_EXPECT_BACKEND": "$(STABLEOPS_GPU_BACKEND)",
            "STABLEOPS_EXPECT_TORCH": version,
            "STABLEOPS_GPU_ARCHS": "$(STABLEOPS_GPU_ARCHS)",
            "STABLEOPS_PYTHON": runtimes[version] or "",
        })
        ld_path = "$(STABLEOPS_GPU_LD_LIBRARY_PATH)"
        if "LD_LIBRARY_PATH" in env:
            ld_path = env["LD_LIBRARY_PATH"] + ":" + ld_path
        test_env["LD_LIBRARY_PATH"] = ld_path
        py_test(
            name = test_name,
            srcs = srcs,
            main = main or (name + ".py"),
            deps = deps,
            data = data,
            env = test_env,
            toolchains = toolchains + [_GPU_BACKEND],
            tags = tags,
            target_compatible_with = compatible if runtimes[version] else [_OLDER_THAN_TARGET],
            **kwargs
        )
        tests.append(":" + test_name)
    native.test_suite(name = name, tests = tests, tags = tags)

def stable_abi_audit_test(name, shared_object, max_glibc = "2.17", max_glibcxx = "3.4.24", **kwargs):
    """Audits a shared object against the stable-ABI promise.

    Fails when the shared object has:
    - an undefined symbol outside the stable C shim (aoti_torch_*, torch_*)
      and the C/C++ runtime;
    - an undefined shim symbol that torch at the target version does not
      export (checked against the symbol tables of the torch runtimes the
      build knows; the message names the symbol and the first version that
      has it), and likewise for shim names it looks up at run time in
      libtorch_cuda.so (GPU builds);
    - a NEEDED entry other than libtorch_cpu.so and system libraries (and, in
      ROCm builds, the HIP runtime libamdhip64.so.N with its hip_x.y symbol
      versions);
    - a glibc / GLIBCXX symbol version above the bounds.
    Prints the highest versions it found.

    Args:
      name: test name.
      shared_object: label of the .so (e.g. a stable_shared_object target).
      max_glibc: highest GLIBC_x.y symbol version allowed.
      max_glibcxx: highest GLIBCXX_x.y.z symbol version allowed (default: the
        newest manylinux_2_28 allows, GCC 8's 3.4.24).
      **kwargs: passed to py_test.
    """
    symbol_files = []
    args = [
        "--so=$(rootpath {})".format(shared_object),
        "--max_glibc=" + max_glibc,
        "--max_glibcxx=" + max_glibcxx,
        "--backend=$(STABLEOPS_GPU_BACKEND)",
        "--target_torch=" + TORCH_TARGET_VERSION,
    ]
    for version, files in sorted(SHIM_SYMBOL_FILES.items()):
        for f in files:
            label = Label("@stableops_torch//:" + f)
            symbol_files.append(label)
            args.append("--shim_symbols={}=$(rootpath {})".format(version, label))
    py_test(
        name = name,
        srcs = [_ABI_AUDIT],
        main = _ABI_AUDIT,
        data = [shared_object] + symbol_files,
        args = args,
        toolchains = [_GPU_BACKEND],
        **kwargs
    )

def stable_target_version_test(name, src, newer_version, expected_error, target_version = None, **kwargs):
    """Guards the torch target version: `src` uses an API newer than it.

    Compiles `src` (-fsyntax-only, the hermetic C++ toolchain, torch's
    stable-ABI headers) twice: with TORCH_TARGET_VERSION at `target_version`
    (default: the configured TORCH_TARGET_VERSION, the one the library is
    built at), which must FAIL with an error matching `expected_error`, and at
    `newer_version`, which must compile. Raising the target past the API
    silently makes the first compile succeed and the test fail.

    Args:
      name: test name.
      src: a .cpp file using an API that appears in `newer_version`.
      newer_version: MAJOR.MINOR where `src` compiles (the build's torch
        headers must be at least this new).
      expected_error: grep -E pattern of the expected compile error.
      target_version: MAJOR.MINOR where `src` must not compile (default: the
        configured target).
      **kwargs: passed to the test rule (tags, size, ...).
    """
    compile_probe_test(
        name = name,
        src = src,
        headers = _STABLE_ABI,
        fails_at = target_version or TORCH_TARGET_VERSION,
        compiles_at = newer_version,
        expected_error = expected_error,
        **kwargs
    )

def stable_wheel(name, requires_dist = [], **kwargs):
    """A binary wheel of py_library targets and shared objects (see stable_wheel_rule).

    `Requires-Dist` always carries torch at the target version: the macro adds
    `torch>=TORCH_TARGET_VERSION` unless `requires_dist` already names torch,
    and fails unless what it names has a lower bound (`>=`, `>`, `==` or
    `~=`) at the target version or above.

    Args:
      name: target name; the output is <distribution>-<version>-<tags>.whl.
      requires_dist: Requires-Dist entries (e.g. ["numpy>=1.26"]).
      **kwargs: attributes of stable_wheel_rule (distribution, version, deps,
        srcs, strip_prefix, ...).
    """
    stable_wheel_rule(
        name = name,
        requires_dist = with_torch_requirement(requires_dist, TORCH_TARGET_VERSION),
        **kwargs
    )
