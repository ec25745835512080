"""cuda: the hermetic CUDA 13.0 toolkit, as repository `@stableops_cuda`.

By default the toolkit is assembled from NVIDIA's PyPI wheels listed, with
their sha256, in toolchains/cuda/cuda.lock (nvcc, crt, nvvm, the runtime and
cccl), downloaded with `pip download --require-hashes` through the configured
interpreter (PYTHON_BIN_PATH), so pip's own configuration decides where they
come from. A hash mismatch fails the fetch.

Repository environment:
  CUDA_PATH   use this local toolkit instead (bin/nvcc, include, lib64 or
              lib); the build output says so.
  STABLEOPS_WHEEL_CACHE
              an absolute directory where the pinned wheels are kept
              unpacked, keyed by the lock's sha256, shared by every output
              base (toolchains/python/pip.bzl; tools/bazel sets it).
  PYTHON_BIN_PATH
              the interpreter whose pip downloads the wheels.

Targets: cuda/bin/nvcc, :toolkit (every file nvcc needs), :cuda_headers (cc_library),
:cudart_static (the runtime, linked statically).
"""

load("//toolchains/python:pip.bzl", "download_wheels")

def _from_wheels(rctx):
    download_wheels(rctx, rctx.path(rctx.attr.lock), "toolchains/cuda/cuda.lock (to use a local toolkit instead, pass --repo_env=CUDA_PATH=/usr/local/cuda)", "unpacked")
    root = "unpacked/nvidia/cu13"
    if not rctx.path(root + "/bin/nvcc").exists:
        fail("stableops: expected bin/nvcc in the CUDA wheels (nvidia/cu13), found none; check toolchains/cuda/cuda.lock")

    # The wheels mark nothing executable.
    rctx.execute(["chmod", "-R", "a+x", root + "/bin", root + "/nvvm/bin"])
    return root

def _cuda_repository_impl(rctx):
    local = rctx.os.environ.get("CUDA_PATH", "")
    if local:
        if not rctx.path(local + "/bin/nvcc").exists:
            fail("stableops: CUDA_PATH={} but {}/bin/nvcc does not exist; point CUDA_PATH at a CUDA 13 toolkit or unset it to use the pinned wheels".format(local, local))

        # buildifier: disable=print  # says which toolkit/torch the build uses: meant for the user
        print("stableops: using the local CUDA toolkit at {} (--repo_env=CUDA_PATH), not the pinned wheels".format(local))
        root = local
        lib = local + ("/lib64" if rctx.path(local + "/lib64/libcudart_static.a").exists else "/lib")
    else:
        root = str(rctx.path(_from_wheels(rctx)))
        lib = root + "/lib"
    for d in ["bin", "include", "nvvm"]:
        rctx.symlink(root + "/" + d, "cuda/" + d)
    rctx.symlink(lib, "cuda/lib")
    res = rctx.execute(["cuda/bin/nvcc", "--version"])
    if res.return_code != 0:
        fail(("stableops: expected '{}/bin/nvcc --version' to run, but it failed: {}. With " +
              "--repo_env=CUDA_PATH, point it at a complete CUDA 13 toolkit or unset it to use the " +
              "pinned wheels of toolchains/cuda/cuda.lock; without it, delete the wheel cache " +
              "(STABLEOPS_WHEEL_CACHE) and build again").format(root, res.stderr.strip()))
    version = res.stdout.strip().splitlines()[-1]
    rctx.file("BUILD.bazel", rctx.read(rctx.attr._build_tpl).replace("{nvcc_version}", version))

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    attrs = {
        "lock": attr.label(default = "//toolchains/cuda:cuda.lock", doc = "The pinned, hash-checked NVIDIA wheels of the toolkit."),
        "_build_tpl": attr.label(default = "//toolchains/cuda:cuda.BUILD.tpl"),
    },
    environ = ["CUDA_PATH", "PYTHON_BIN_PATH", "STABLEOPS_WHEEL_CACHE"],
    doc = "The CUDA toolkit: pinned NVIDIA wheels, or CUDA_PATH.",
)

def _cuda_extension_impl(_mctx):
    cuda_repository(name = "stableops_cuda")

cuda = module_extension(
    implementation = _cuda_extension_impl,
    doc = "Creates @stableops_cuda (see the module docstring).",
)
