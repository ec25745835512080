"""The configured interpreter and hash-checked wheel downloads through its pip.

Shared by the torch, CUDA and PyPI-tool repository rules.
"""

# The build image's torch 2.13 interpreter; --repo_env=PYTHON_BIN_PATH overrides.
DEFAULT_PYTHON = "/opt/stableops/venvs/torch-2.13.0/bin/python3"

def configured_python(rctx):
    """The interpreter repository rules use: PYTHON_BIN_PATH or the image's."""
    return rctx.os.environ.get("PYTHON_BIN_PATH", DEFAULT_PYTHON)

def download_wheels(rctx, requirements, lock_name, dest):
    """Downloads the pinned wheels of `requirements` and unpacks them into `dest`.

    `pip download --require-hashes` through the configured interpreter, so
    pip's own configuration decides where they come from and a file whose
    sha256 differs from the pin fails. Returns the unpacked wheel names.

    Args:
      rctx: the repository context.
      requirements: path of a requirements file (`name==version --hash=sha256:...`).
      lock_name: the lock file to name in error messages.
      dest: directory (relative to the repository) to unpack into.

    Returns:
      The file names of the unpacked wheels.
    """
    python = configured_python(rctx)
    res = rctx.execute([
        python,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--dest",
        "_wheels",
        "--requirement",
        str(requirements),
    ], timeout = 1800)
    if res.return_code != 0:
        fail(("stableops: expected to download the wheels pinned in {lock} with {py} -m pip " +
              "(hash-checked), but pip failed (exit {rc}). A hash mismatch means the index served " +
              "another file than the one pinned: check it before updating the lock on purpose.\n{err}").format(
            lock = lock_name,
            py = python,
            rc = res.return_code,
            err = res.stderr.strip(),
        ))
    wheels = [f for f in rctx.path("_wheels").readdir() if f.basename.endswith(".whl")]
    for whl in wheels:
        res = rctx.execute([python, "-m", "zipfile", "-e", str(whl), dest])
        if res.return_code != 0:
            fail("stableops: could not unpack {}: {}".format(whl, res.stderr))
    rctx.delete("_wheels")
    return [w.basename for w in wheels]
