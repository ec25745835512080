"""torch: the stable-ABI headers and libtorch_cpu.so of a configured interpreter.

Repository `@stableops_torch` exposes:
  :stable_abi    cc_library: torch's stable-ABI headers only (torch/csrc/stable,
                 torch/headeronly, the AOTI C shim) plus TORCH_TARGET_VERSION.
                 at::/c10:: headers are deliberately absent, so code that
                 reaches for them fails to compile.
  :libtorch_cpu  cc_import of libtorch_cpu.so, to link against (the shim's
                 symbols live there; torch loads extensions without
                 RTLD_GLOBAL, so the NEEDED entry is required).
  :config.bzl    the configured values everything else derives from:
                 TORCH_TARGET_VERSION (root module's torch.configure, else the
                 default), TORCH_RUNTIMES {version: interpreter} for tests (none
                 older than the target), SKIPPED_TORCH_RUNTIMES {version:
                 reason}, SHIM_SYMBOL_FILES {version: [symbol lists]}.
  :shim_symbols  the aoti_torch_*/torch_* symbols each runtime's
                 libtorch_cpu.so and libtorch_cuda.so export (the ABI audit's
                 reference).
  :python3       the default interpreter, as an executable.

Repository environment:
  PYTHON_BIN_PATH          interpreter whose torch is built against
                           (default: the build image's torch 2.13.0 venv).
  STABLEOPS_TORCH_RUNTIMES comma-separated interpreters that tests run under
                           (default: every /opt/stableops/venvs/torch-*/bin/python3
                           of the image, else PYTHON_BIN_PATH alone).
"""

load("//toolchains/python:pip.bzl", "configured_python")
load("//toolchains/torch:version.bzl", "DEFAULT_TORCH_TARGET_VERSION", "MIN_TORCH_VERSION", "parse_version", "target_version_hex")

_IMAGE_VENVS = "/opt/stableops/venvs"

# Finds torch without importing it: `import torch` loads libtorch (hundreds of
# MB; 35-70 s from a cold page cache here) in every fresh output base, and
# only the version and the package directory are needed.
_PROBE = """
import os, sys
try:
    from importlib import metadata, util
    spec = util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("No module named 'torch'")
    version = metadata.version("torch")
except Exception as e:
    print("ERROR", type(e).__name__, e)
    sys.exit(0)
print(version)
print(os.path.dirname(spec.origin))
"""

def _probe(rctx, python):
    """Returns (version, torch_dir) of `python`'s torch, failing clearly."""
    res = rctx.execute([python, "-c", _PROBE], quiet = True)
    if res.return_code != 0:
        fail(("stableops: expected a Python interpreter at '{py}' (from --repo_env=PYTHON_BIN_PATH " +
              "or the build image's default), but running it failed (exit {rc}): {err}\n" +
              "Set --repo_env=PYTHON_BIN_PATH=/path/to/python with torch >= {min} installed.").format(
            py = python,
            rc = res.return_code,
            err = res.stderr.strip(),
            min = MIN_TORCH_VERSION,
        ))
    lines = res.stdout.strip().splitlines()
    if not lines or lines[0].startswith("ERROR"):
        fail(("stableops: expected torch >= {min} importable by '{py}', but finding it failed: {err}\n" +
              "Install torch>={min} into that interpreter or point --repo_env=PYTHON_BIN_PATH at one that has it.").format(
            min = MIN_TORCH_VERSION,
            py = python,
            err = lines[0] if lines else res.stderr.strip(),
        ))
    version = lines[0].strip()
    if parse_version(version) < parse_version(MIN_TORCH_VERSION):
        fail(("stableops: expected torch >= {min} in '{py}', found torch {found}. " +
              "The stable-ABI headers this build uses first appear in {min}; upgrade torch " +
              "or set --repo_env=PYTHON_BIN_PATH to another interpreter.").format(
            min = MIN_TORCH_VERSION,
            py = python,
            found = version,
        ))
    return version, lines[1].strip()

def _runtimes(rctx, default_python):
    """{torch version: (interpreter, torch directory)} of every runtime found."""
    listed = rctx.os.environ.get("STABLEOPS_TORCH_RUNTIMES", "")
    if listed:
        pythons = [p.strip() for p in listed.split(",") if p.strip()]
    else:
        venvs = rctx.path(_IMAGE_VENVS)
        pythons = []
        if venvs.exists:
            pythons = sorted([str(d) + "/bin/python3" for d in venvs.readdir() if d.basename.startswith("torch-")])
        if not pythons:
            pythons = [default_python]
    runtimes = {}
    for py in pythons:
        version, torch_dir = _probe(rctx, py)
        runtimes[version.split("+")[0]] = (py, torch_dir)
    return runtimes

# The stable C shim's symbols: what the ABI audit checks a shared object's
# undefined symbols against (aoti_torch_* and torch_* C functions, the awk
# pattern below).
# One shell for every library: the nm calls run side by side and the
# filtering is awk's, not Starlark's (0.84 s -> 0.24 s of every fresh
# output base's setup on a 2-core machine, before analysis can start).
# Arguments: pairs of (library, output file); a library that does not exist
# gets no file.
_SHIM_SCRIPT = """
set -u
pids=""
while [ $# -ge 2 ]; do
  lib=$1 out=$2
  shift 2
  [ -e "$lib" ] || continue
  mkdir -p "$(dirname "$out")"
  ( set -o pipefail 2>/dev/null
    nm -D --defined-only --format=posix "$lib" |
      awk '$1 ~ /^(aoti_torch_|torch_)/ { print $1 }' | LC_ALL=C sort >"$out" ||
      { echo "nm -D --defined-only $lib failed" >&2; exit 1; } ) &
  pids="$pids $!"
done
status=0
for p in $pids; do wait "$p" || status=1; done
exit $status
"""

def _shim_symbols(rctx, libs):
    """Writes the aoti_torch_*/torch_* symbols each existing library exports (sorted, one per line).

    Args:
      rctx: the repository context.
      libs: [(torch version, library path, output file in the repository)].

    Returns:
      {torch version: [the output files written]} (a file is written when its
      library exists).
    """
    args = []
    for _, lib, out in libs:
        args += [lib, str(rctx.path(out))]
    res = rctx.execute(["bash", "-c", _SHIM_SCRIPT, "shim_symbols"] + args, quiet = True)
    if res.return_code != 0:
        fail(("stableops: expected `nm -D --defined-only` (binutils) to list torch's shim symbols " +
              "for the ABI audit, but it failed (exit {}): {}. Build through tools/bazel, whose " +
              "image has binutils, or install binutils").format(res.return_code, res.stderr.strip()))
    written = {}
    for version, lib, out in libs:
        if rctx.path(lib).exists:
            written.setdefault(version, []).append(out)
    return written

def _torch_repository_impl(rctx):
    target = rctx.attr.target_version
    target_hex = target_version_hex(target)
    python = configured_python(rctx)
    version, torch_dir = _probe(rctx, python)
    if parse_version(version)[:2] < parse_version(target)[:2]:
        fail(("stableops: the torch target version is {target} (torch.configure), but the build's torch " +
              "({py}) is {found}: its headers cannot offer a newer API. Build against torch >= {target} " +
              "(--repo_env=PYTHON_BIN_PATH) or lower the target.").format(target = target, py = python, found = version))
    rctx.symlink(torch_dir + "/include", "include")
    rctx.symlink(torch_dir + "/lib/libtorch_cpu.so", "lib/libtorch_cpu.so")
    rctx.symlink(python, "python3")

    # The Python toolchain's interpreter: STABLEOPS_PYTHON (set per test by
    # stable_py_test) picks one of TORCH_RUNTIMES, else the build's own.
    rctx.file("python_launcher", "#!/bin/sh\nexec \"${{STABLEOPS_PYTHON:-{}}}\" \"$@\"\n".format(python), executable = True)

    found = _runtimes(rctx, python)
    runtimes = {}
    skipped = {}
    shim_libs = []  # (torch version, library, its symbol file)
    for v, (py, tdir) in sorted(found.items()):
        if parse_version(v)[:2] < parse_version(target)[:2]:
            skipped[v] = "torch {} is older than the target version {}: the shared object does not promise to load there".format(v, target)
        else:
            runtimes[v] = py

        # Every runtime's shim symbols, older ones too: the audit reports the
        # version that first has a symbol.
        for lib in ("libtorch_cpu", "libtorch_cuda"):
            shim_libs.append((v, "{}/lib/{}.so".format(tdir, lib), "shim_symbols/{}/{}.txt".format(v, lib)))
    symbol_files = _shim_symbols(rctx, shim_libs)
    if not runtimes:
        fail(("stableops: no torch runtime >= the target version {} to run tests under (found: {}); " +
              "add one to --repo_env=STABLEOPS_TORCH_RUNTIMES or lower the target.").format(target, ", ".join(found.keys())))

    rctx.file("config.bzl", "\n".join([
        '"""Generated by @stableops//toolchains/torch:extension.bzl: the configured torch."""',
        "",
        "# The oldest torch the built binaries load into (torch.configure of the",
        "# root module, else the default of toolchains/torch/version.bzl).",
        'TORCH_TARGET_VERSION = "{}"'.format(target),
        'TORCH_TARGET_VERSION_HEX = "{}"'.format(target_hex),
        "",
        "# The torch whose headers and libtorch_cpu.so the build uses.",
        'BUILD_TORCH_VERSION = "{}"'.format(version),
        "",
        "# torch version -> interpreter; tests run under each (none older than the target).",
        "TORCH_RUNTIMES = " + json.encode_indent(runtimes, indent = "    "),
        "",
        "# torch version -> why tests do not run under it.",
        "SKIPPED_TORCH_RUNTIMES = " + json.encode_indent(skipped, indent = "    "),
        "",
        "# torch version -> files listing the shim symbols its libraries export.",
        "SHIM_SYMBOL_FILES = " + json.encode_indent(symbol_files, indent = "    "),
        "",
    ]))
    rctx.template("BUILD.bazel", rctx.attr._build_tpl, {
        "{target_version_hex}": target_hex,
    })

    # buildifier: disable=print  # says which toolkit/torch the build uses: meant for the user
    print("stableops: torch target {}; building against torch {} from {}; tests run under: {}{}".format(
        target,
        version,
        python,
        ", ".join(["{} ({})".format(k, v) for k, v in runtimes.items()]),
        "".join(["; not under {}: {}".format(k, r) for k, r in skipped.items()]),
    ))

torch_repository = repository_rule(
    implementation = _torch_repository_impl,
    attrs = {
        "target_version": attr.string(mandatory = True, doc = "MAJOR.MINOR."),
        "_build_tpl": attr.label(default = "//toolchains/torch:torch.BUILD.tpl"),
    },
    environ = ["PYTHON_BIN_PATH", "STABLEOPS_TORCH_RUNTIMES"],
    local = True,
    doc = "Exposes torch's stable-ABI headers, libtorch_cpu.so and the configured target version from PYTHON_BIN_PATH.",
)

def _torch_extension_impl(mctx):
    target = DEFAULT_TORCH_TARGET_VERSION
    for mod in mctx.modules:
        if not mod.is_root:
            continue
        for tag in mod.tags.configure:
            target = tag.target_version

    # Fails early, naming the value, on anything that is not MAJOR.MINOR >= the minimum.
    target_version_hex(target)
    torch_repository(name = "stableops_torch", target_version = target)

torch = module_extension(
    implementation = _torch_extension_impl,
    tag_classes = {
        "configure": tag_class(
            attrs = {
                "target_version": attr.string(
                    mandatory = True,
                    doc = "Oldest torch the built binaries must load into, MAJOR.MINOR (default: DEFAULT_TORCH_TARGET_VERSION in version.bzl). Only the root module's setting counts.",
                ),
            },
        ),
    },
    doc = "Configures @stableops_torch. Settings come from the root module (see docs/BUILD_ENVIRONMENT.md).",
)
