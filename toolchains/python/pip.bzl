"""The configured interpreter and hash-checked wheel downloads through its pip.

Shared by the torch, CUDA and PyPI-tool repository rules.
"""

# The build image's torch 2.13 interpreter; --repo_env=PYTHON_BIN_PATH overrides.
DEFAULT_PYTHON = "/opt/stableops/venvs/torch-2.13.0/bin/python3"

def configured_python(rctx):
    """The interpreter repository rules use: PYTHON_BIN_PATH or the image's."""
    return rctx.os.environ.get("PYTHON_BIN_PATH", DEFAULT_PYTHON)

# Bump when the unpacked layout changes, so shared copies made by an older
# rule are not reused (see download_wheels).
_SHARED_LAYOUT = "v1"

# What to check when writing the unpacked wheels fails.
_DISK_HINT = ("Check free space and permissions there; with STABLEOPS_WHEEL_CACHE set, unsetting " +
              "it unpacks into each output base instead")

def _pip_download_and_unpack(rctx, requirements, lock_name, wheels_dir, dest):
    """`pip download` into wheels_dir, unzip into dest, delete wheels_dir; returns the wheel names."""
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
        wheels_dir,
        "--requirement",
        str(requirements),
    ], timeout = 1800)
    if res.return_code != 0:
        fail(("stableops: expected to download the wheels pinned in {lock} with {py} -m pip " +
              "(hash-checked), but pip failed (exit {rc}). A hash mismatch means the index served " +
              "another file than the one pinned: check it before updating the lock on purpose; " +
              "otherwise check that {py} -m pip reaches its configured index (pip config list).\n{err}").format(
            lock = lock_name,
            py = python,
            rc = res.return_code,
            err = res.stderr.strip(),
        ))

    # Listed with ls, not path.readdir(): wheels_dir may be outside the
    # repository (download_wheels' shared copy), and Bazel watches what a
    # repository rule reads outside it: a directory it listed and then saw
    # deleted fails the fetch as an inconsistent file system.
    res = rctx.execute(["ls", "-1", wheels_dir])
    if res.return_code != 0:
        fail("stableops: expected to list the downloaded wheels in {}, but ls failed: {}. {}".format(wheels_dir, res.stderr.strip(), _DISK_HINT))
    names = sorted([n for n in res.stdout.splitlines() if n.endswith(".whl")])
    for name in names:
        res = rctx.execute([python, "-m", "zipfile", "-e", wheels_dir + "/" + name, dest])
        if res.return_code != 0:
            fail("stableops: expected to unpack {} into {}, but it failed: {}. {}".format(name, dest, res.stderr.strip(), _DISK_HINT))
    rctx.execute(["rm", "-rf", wheels_dir])
    return names

def _shared_unpack(rctx, share, requirements, lock_name, dest):
    """download_wheels through the shared directory `share` (see there)."""
    if not share.startswith("/"):
        fail("stableops: expected STABLEOPS_WHEEL_CACHE to be an absolute directory, found '{}'; unset it to unpack into each output base".format(share))
    res = rctx.execute(["sha256sum", str(requirements)])
    if res.return_code != 0:
        fail("stableops: expected sha256sum to hash {}, but it failed: {}".format(requirements, res.stderr.strip()))
    key = "{}-{}".format(_SHARED_LAYOUT, res.stdout.split(" ")[0][:32])
    final = "{}/{}".format(share, key)

    # Outside the repository only through commands (see _pip_download_and_unpack).
    if rctx.execute(["test", "-e", final + "/complete"]).return_code != 0:
        res = rctx.execute(["mkdir", "-p", share])
        if res.return_code != 0:
            fail("stableops: expected to create STABLEOPS_WHEEL_CACHE={}, but mkdir failed: {}. {}".format(share, res.stderr.strip(), _DISK_HINT))

        # A fill that failed (or was killed) leaves its .KEY.XXXXXX behind;
        # a day-old one is dead: remove it.
        rctx.execute(["find", share, "-maxdepth", "1", "-name", ".v*", "-mmin", "+1440", "-exec", "rm", "-rf", "{}", "+"])
        res = rctx.execute(["mktemp", "-d", "{}/.{}.XXXXXX".format(share, key)])
        if res.return_code != 0:
            fail("stableops: expected to create a directory in STABLEOPS_WHEEL_CACHE={}, but mktemp failed: {}. {}".format(share, res.stderr.strip(), _DISK_HINT))
        tmp = res.stdout.strip()
        rctx.execute(["chmod", "755", tmp])
        names = _pip_download_and_unpack(rctx, requirements, lock_name, tmp + "/wheels", tmp + "/unpacked")

        # rctx.file writes only inside the repository: write there, then move.
        rctx.file("_names", "\n".join(names) + "\n", executable = False)
        res = rctx.execute(["sh", "-c", 'mv "$1" "$2/names" && touch "$2/complete"', "sh", "_names", tmp])
        if res.return_code != 0:
            fail("stableops: expected to write into {}, but it failed: {}. {}".format(tmp, res.stderr.strip(), _DISK_HINT))

        # rename(2) is atomic: another output base filling the same key at
        # the same time either wins (ours is dropped) or loses.
        res = rctx.execute(["mv", "-T", tmp, final])
        if res.return_code != 0:
            rctx.execute(["rm", "-rf", tmp])
            if rctx.execute(["test", "-e", final + "/complete"]).return_code != 0:
                fail("stableops: expected to move the unpacked wheels into {}, but mv failed: {}. {}".format(final, res.stderr.strip(), _DISK_HINT))
    res = rctx.execute(["cat", final + "/names"])
    if res.return_code != 0:
        fail("stableops: expected {}/names (written with the unpacked wheels), but reading it failed: {}. The entry is damaged: delete {} and build again".format(final, res.stderr.strip(), final))
    rctx.symlink(final + "/unpacked", dest)
    return [n for n in res.stdout.splitlines() if n]

def download_wheels(rctx, requirements, lock_name, dest):
    """Downloads the pinned wheels of `requirements` and unpacks them into `dest`.

    `pip download --require-hashes` through the configured interpreter, so
    pip's own configuration decides where they come from and a file whose
    sha256 differs from the pin fails. Returns the unpacked wheel names.

    With `--repo_env=STABLEOPS_WHEEL_CACHE=DIR` (tools/bazel sets it) the
    wheels are unpacked once per machine into DIR/<layout>-<sha256 of the
    requirements>/, which every output base then links as `dest` (read it,
    never write it): a fresh output base skips pip and the unzip (2.4 s of the
    CUDA toolkit's repository rule on a 2-core machine). The key is the
    requirements file itself, which pins every wheel by its sha256; a
    directory counts only once its `complete` marker is written, after the
    unpack, and is moved into place in one rename. Unset, each output base
    unpacks its own copy.

    Args:
      rctx: the repository context (its rule lists STABLEOPS_WHEEL_CACHE in `environ`).
      requirements: path of a requirements file (`name==version --hash=sha256:...`).
      lock_name: the lock file to name in error messages.
      dest: directory (relative to the repository) to unpack into.

    Returns:
      The file names of the unpacked wheels.
    """
    share = rctx.os.environ.get("STABLEOPS_WHEEL_CACHE", "")
    if share:
        return _shared_unpack(rctx, share, requirements, lock_name, dest)
    return _pip_download_and_unpack(rctx, requirements, lock_name, "_wheels", dest)
