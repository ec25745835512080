"""stable_wheel: a binary wheel built with PyPA's `wheel` tool (wheel pack)."""

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
    inputs = []
    for target in ctx.attr.srcs:
        for f in target[DefaultInfo].files.to_list():
            if f.short_path.startswith("../"):
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

stable_wheel = rule(
    implementation = _stable_wheel_impl,
    doc = """A binary wheel (e.g. cp310-abi3-manylinux_2_28_x86_64) of Python
sources and shared objects, packed by PyPA's `wheel pack`, which writes RECORD.
Output: <distribution>-<version>-<tags>.whl. Byte-reproducible.""",
    attrs = {
        "distribution": attr.string(mandatory = True, doc = "Distribution name (Name: in METADATA)."),
        "version": attr.string(mandatory = True, doc = "Distribution version."),
        "srcs": attr.label_list(allow_files = True, doc = "Files to package: py_library targets, shared objects, data."),
        "strip_prefix": attr.string(doc = "Leading directory removed from each file's path in the wheel (e.g. 'python')."),
        "summary": attr.string(default = ""),
        "requires_python": attr.string(default = ">=3.10"),
        "requires_dist": attr.string_list(doc = "Requires-Dist: lines, e.g. ['torch>=2.11']."),
        "license": attr.label(allow_single_file = True),
        "readme": attr.label(allow_single_file = True),
        "python_tag": attr.string(default = "cp310"),
        "abi_tag": attr.string(default = "abi3"),
        "platform_tag": attr.string(default = "manylinux_2_28_x86_64"),
        "_tool": attr.label(
            default = "//bazel/private:build_wheel",
            executable = True,
            cfg = "exec",
        ),
    },
)
