"""stable_wheel_rule: a binary wheel built with PyPA's `wheel` tool (wheel pack).

//bazel:defs.bzl's stable_wheel wraps it and adds the torch requirement
(with_torch_requirement).
"""

load("//toolchains/torch:version.bzl", "parse_version")

def with_torch_requirement(requires_dist, target_version):
    """`requires_dist` with torch at `target_version`, failing on an older floor.

    Args:
      requires_dist: Requires-Dist entries as given.
      target_version: MAJOR.MINOR the binaries are built for.

    Returns:
      The entries, with `torch>=<target_version>` first unless one names torch.
    """
    out = []
    has_torch = False
    for req in requires_dist:
        name = req
        for sep in ("<", ">", "=", "!", "~", " ", ";", "["):
            name = name.split(sep)[0]
        if name.strip().lower() != "torch":
            out.append(req)
            continue
        has_torch = True
        if not _floor_at_least(req, parse_version(target_version)[:2]):
            fail(("stableops: expected the wheel's torch requirement to bound torch from below " +
                  "at {t} or higher (>=, >, == or ~=; the binaries are built for torch {t}), " +
                  "found '{r}'; drop it and stable_wheel adds torch>={t} itself").format(
                t = target_version,
                r = req,
            ))
        out.append(req)
    if not has_torch:
        out = ["torch>=" + target_version] + out
    return out

def _floor_at_least(req, minimum):
    """Whether one of `req`'s version clauses bounds it from below at `minimum`.

    Args:
      req: a Requires-Dist entry, e.g. "torch>=2.12,<3; python_version>='3.10'".
      minimum: [MAJOR, MINOR], as parse_version returns them.

    Returns:
      True if a `>=`, `>`, `==` or `~=` clause names MAJOR.MINOR >= minimum.
    """
    spec = req.split(";")[0]
    for sep in ("(", ")"):
        spec = spec.replace(sep, "")
    for clause in spec.split(","):
        clause = clause.strip()
        for op in (">=", "==", "~=", ">"):
            i = clause.find(op)
            if i < 0:
                continue
            version = clause[i + len(op):].strip().rstrip(".*")
            if version and version[0].isdigit() and parse_version(version)[:2] >= minimum:
                return True
            break
    return False

def _dest(f, strip_prefix):
    path = f.short_path
    if strip_prefix and path.startswith(strip_prefix + "/"):
        path = path[len(strip_prefix) + 1:]
    return path

def _stable_wheel_impl(ctx):
    tags = "{}-{}-{}".format(ctx.attr.python_tag, ctx.attr.abi_tag, ctx.attr.platform_tag)
    dist = ctx.attr.distribution.replace("-", "_")
    out = ctx.actions.declare_file("{}-{}-{}.whl".format(dist, ctx.attr.version, tags))

    args = ctx.actions.args()
    args.add("--output", out)
    args.add("--distribution", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--tag", tags)
    args.add("--summary", ctx.attr.summary)
    args.add("--requires_python", ctx.attr.requires_python)
    args.add_all(ctx.attr.requires_dist, before_each = "--requires_dist")
    if ctx.file.license:
        args.add("--license", ctx.file.license)
    if ctx.file.readme:
        args.add("--readme", ctx.file.readme)
    files = {}
    for target in ctx.attr.deps:
        # A py_library's sources and data, with those of its deps.
        for f in target[DefaultInfo].default_runfiles.files.to_list():
            files[f.short_path] = f
    for target in ctx.attr.srcs:
        for f in target[DefaultInfo].files.to_list():
            files[f.short_path] = f
    inputs = []
    for short_path, f in sorted(files.items()):
        # Files of other repositories (the interpreter, toolkits) and Bazel's
        # symlinks to shared libraries a binary links (_solib_<cpu>/) never ship.
        if short_path.startswith("../") or short_path.startswith("_solib_"):
            continue
        args.add("--file", "{}={}".format(_dest(f, ctx.attr.strip_prefix), f.path))
        inputs.append(f)
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = [args],
        inputs = inputs + [f for f in [ctx.file.license, ctx.file.readme] if f],
        outputs = [out],
        mnemonic = "WheelPack",
        progress_message = "Packing wheel %{output}",
        # Fixed timestamps inside the zip: same inputs, same bytes.
        env = {"SOURCE_DATE_EPOCH": "315532800", "PYTHONHASHSEED": "0"},
    )
    return [DefaultInfo(files = depset([out]))]

stable_wheel_rule = rule(
    implementation = _stable_wheel_impl,
    doc = """A binary wheel (e.g. cp310-abi3-manylinux_2_28_x86_64) of Python
sources and shared objects, packed by PyPA's `wheel pack`, which writes RECORD.
Output: <distribution>-<version>-<tags>.whl. Byte-reproducible. Use it through
stable_wheel (//bazel:defs.bzl), which adds the torch requirement.""",
    attrs = {
        "distribution": attr.string(mandatory = True, doc = "Distribution name (Name: in METADATA)."),
        "version": attr.string(mandatory = True, doc = "Distribution version."),
        "deps": attr.label_list(doc = "py_library targets: their sources and data (the shared object, py.typed, ...), and their deps', are packaged."),
        "srcs": attr.label_list(allow_files = True, doc = "More files to package (each target's default outputs)."),
        "strip_prefix": attr.string(doc = "Leading directory removed from each file's path in the wheel (e.g. 'python')."),
        "summary": attr.string(default = "", doc = "Summary: line of METADATA (one line)."),
        "requires_python": attr.string(default = ">=3.10", doc = "Requires-Python: of METADATA; the wheel's abi3 tag needs CPython 3.10 or newer."),
        "requires_dist": attr.string_list(doc = "Requires-Dist: lines, e.g. ['torch>=2.11'] (stable_wheel derives the torch one)."),
        "license": attr.label(allow_single_file = True, doc = "License file, shipped in the .dist-info directory."),
        "readme": attr.label(allow_single_file = True, doc = "Markdown file: the long description in METADATA."),
        "python_tag": attr.string(default = "cp310", doc = "Python tag of the file name (PEP 425): the oldest CPython the abi3 binaries load into."),
        "abi_tag": attr.string(default = "abi3", doc = "ABI tag of the file name (PEP 425)."),
        "platform_tag": attr.string(default = "manylinux_2_28_x86_64", doc = "Platform tag of the file name; //tests:test_auditwheel checks the binaries against it."),
        "_tool": attr.label(
            default = "//bazel/private:build_wheel",
            executable = True,
            cfg = "exec",
        ),
    },
)
